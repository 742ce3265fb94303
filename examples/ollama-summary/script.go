package main

// turn is one scripted exchange: what the human says and what the
// assistant answers.
type turn struct{ human, ai string }

// script is a 40-turn conversation about planning a team offsite: names,
// numbers, dates and decisions that a good summary keeps, and small talk
// that it drops.
var script = []turn{
	{"Hi! I'm Maria Lopez, I run the platform team at Northwind. I need help planning our team offsite.", "Hello Maria! Happy to help. How many people, and do you have a place and dates in mind?"},
	{"There are 12 of us. We are thinking of Lisbon, sometime in May.", "Lisbon in May is a great choice: mild weather and direct flights from most of Europe. Do you have a budget?"},
	{"The budget is 18,000 euros in total, travel included.", "Noted: 18,000 euros for 12 people, about 1,500 euros per person including travel."},
	{"Most of the team flies from Berlin, three people come from London and one from Madrid.", "Berlin to Lisbon is about 3.5 hours and usually 150 to 250 euros return in May; London and Madrid are cheaper."},
	{"How many days should we plan for?", "For 12 people, three days works well: one arrival and workshop day, one full workshop day, one social day and departure."},
	{"Let's do three days. Can we make it Wednesday 14 May to Friday 16 May 2025?", "Wednesday 14 May to Friday 16 May 2025 it is. Flying out on Friday evening keeps the weekend free."},
	{"Thanks, that sounds good.", "You're welcome!"},
	{"We need a venue with a room for 12 and good wifi. Any ideas?", "Three options: Casa do Impacto in Santos (about 900 euros a day), LX Factory's event loft (about 1,200 euros a day) and the Hotel Avenida Palace meeting room (about 1,500 euros a day with coffee breaks)."},
	{"The LX Factory loft sounds fun. What is included?", "The loft includes a projector, two whiteboards, wifi and a kitchenette; catering is ordered separately at about 25 euros per person per day."},
	{"And Casa do Impacto?", "Casa do Impacto includes screens and wifi, but the room only seats 10 comfortably, which is tight for 12."},
	{"Then Casa do Impacto is out. Let's compare LX Factory and the Avenida Palace.", "Over two workshop days, LX Factory costs 2,400 euros plus about 600 euros of catering; the Avenida Palace costs 3,000 euros with coffee breaks but lunch is extra."},
	{"We decided on the LX Factory loft for 14 and 15 May.", "Great decision. I noted the LX Factory event loft for Wednesday 14 and Thursday 15 May 2025, about 3,000 euros with catering."},
	{"Who should I contact there?", "The events manager at LX Factory is Joana Ferreira; ask her for a hold on both days before signing."},
	{"I'll email Joana Ferreira today.", "Good. Ask for the deposit terms too; venues in Lisbon usually ask for 30 percent up front."},
	{"Now hotels. We want everyone in one hotel close to the venue.", "Near LX Factory in Alcantara and Santos, the Hotel Ribeira and the Lumiares are good fits; the Ribeira is about 140 euros a night, the Lumiares about 190."},
	{"How many nights would that be?", "Arriving Tuesday 13 May and leaving Friday 16 May is 3 nights, so 36 room-nights for 12 people."},
	{"At 140 euros that is 5,040 euros, right?", "Yes: 36 room-nights at 140 euros is 5,040 euros at the Hotel Ribeira; at the Lumiares it would be 6,840 euros."},
	{"Let's book the Hotel Ribeira, 12 single rooms, 13 to 16 May.", "Noted: Hotel Ribeira, 12 single rooms, check-in Tuesday 13 May, check-out Friday 16 May 2025, 5,040 euros."},
	{"By the way, the weather in Berlin is awful today.", "Sorry to hear that! Lisbon should be around 22 degrees in mid-May."},
	{"Back to the plan. What is our total so far?", "Venue and catering about 3,000 euros, hotel 5,040 euros: 8,040 euros, leaving 9,960 euros of the 18,000 for flights, dinners and activities."},
	{"Flights should be about 250 euros each on average, I think.", "Then flights are about 3,000 euros for 12 people, which leaves about 6,960 euros."},
	{"For the social day, Friday 16 May, what could we do?", "Options: a sailing trip on the Tagus (about 65 euros per person), a food tour in Alfama (about 80 euros) or a day trip to Sintra (about 90 euros with a guide)."},
	{"Sintra is too far if people fly out Friday evening.", "Agreed; Sintra takes half a day at least. The sailing trip is 2 hours and leaves from Belem, close to the hotel."},
	{"Let's do the sailing trip on Friday morning at 10.", "Noted: sailing trip on the Tagus, Friday 16 May at 10:00 from Belem, about 780 euros for 12 people."},
	{"We also need a team dinner on Wednesday evening.", "For 12 people I suggest A Cevicheria or Taberna da Rua das Flores; a set menu is about 55 euros per person, so about 660 euros."},
	{"Taberna da Rua das Flores. Does it take groups?", "It takes groups of up to 14 only with a booking at least two weeks ahead, so book by 30 April."},
	{"OK, book Taberna da Rua das Flores for Wednesday 14 May at 20:00, 12 people.", "Noted: team dinner at Taberna da Rua das Flores, Wednesday 14 May 2025 at 20:00, 12 people, about 660 euros; book by 30 April."},
	{"Tom Becker from my team is vegetarian and Aisha Khan has a nut allergy.", "Noted for the catering and the dinner: one vegetarian (Tom Becker) and one nut allergy (Aisha Khan)."},
	{"What about airport transfers?", "A taxi from Lisbon airport to Santos costs about 20 euros; for the Berlin group arriving together a minibus for 8 is about 70 euros."},
	{"We'll take taxis, it's simpler.", "Taxis it is, about 20 euros a ride: roughly 240 euros both ways for everyone."},
	{"Now the agenda. Day one should be about the 2025 roadmap.", "Wednesday 14 May: the 2025 roadmap. A common shape is a morning review of the last quarter and an afternoon of planning in small groups."},
	{"Day two is for the migration to Kubernetes that we promised for Q3.", "Thursday 15 May: the Kubernetes migration promised for Q3, with a morning on the design and an afternoon on the rollout plan and risks."},
	{"Priya Natarajan will lead the Kubernetes session.", "Noted: Priya Natarajan leads the Kubernetes session on Thursday 15 May."},
	{"And I will lead the roadmap day myself.", "Noted: Maria Lopez leads the roadmap day on Wednesday 14 May."},
	{"Cool. What's the final total?", "Venue and catering 3,000, hotel 5,040, flights about 3,000, sailing 780, dinner 660, taxis about 240: about 12,720 euros, 5,280 under the 18,000 budget."},
	{"Great, we can add a second dinner on Thursday then.", "A second dinner on Thursday 15 May at about 55 euros per person adds 660 euros, for a total of about 13,380 euros."},
	{"Yes, add it. Somewhere casual near the hotel.", "Noted: casual team dinner on Thursday 15 May near the Hotel Ribeira, for example Time Out Market, about 660 euros."},
	{"What is still open?", "Open items: Maria emails Joana Ferreira at LX Factory for the hold and deposit terms, book Taberna da Rua das Flores by 30 April, book flights and the sailing trip."},
	{"I'll ask Tom Becker to book the flights by 15 April.", "Noted: Tom Becker books the flights by 15 April 2025."},
	{"Thanks, that's everything for now. Bye!", "Goodbye Maria, and enjoy the offsite in Lisbon!"},
}
