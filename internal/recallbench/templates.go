package recallbench

// The generator's material: the kinds of fact it plants and the filler
// chit-chat around them. Templates use {v} for the fact's value, {x} for
// the kind's second slot (a topic, a city...) and, in filler, {name} for a
// slot drawn from fillerSlots.
//
// Rules the material keeps (TestGenerateValuesOnlyInEvidence checks them
// over many seeds):
//
//   - every value is distinct across kinds and never occurs, as a whole
//     word, in filler or in another kind's turns, so finding the value in
//     a loaded context means the evidence turn (or a fact taken from it)
//     was loaded;
//   - a question never contains its value;
//   - a question is a paraphrase of its statement: it shares at least one
//     content word with it (so a lexical index has a chance) but is never a
//     copy, and several questions need more than lexical overlap (the
//     location and job questions share no content word with some of their
//     statements; a fact layer answers them);
//   - filler reuses the questions' content words on purpose (plans, names,
//     work, food, budgets, flights, dogs, appointments, books...) as
//     distractors, as real chit-chat does.

// factKind is one kind of fact the generator plants.
type factKind struct {
	name   string
	values []string // the fact's value: what a loaded context must contain
	extra  []string // the {x} slot, if the templates use it
	say    []string // the user's statement (human message)
	ack    []string // the assistant's answer
	ask    []string // the question asked at the end
	update *factUpdate
}

// factUpdate is a later change of a fact ("we moved again"): the question
// then asks for the current value, whose evidence is the update's turn.
type factUpdate struct {
	say []string
	ack []string
	ask []string
}

var factKinds = []factKind{
	{
		name:   "sister",
		values: []string{"Lina", "Marta", "Ines", "Sofia", "Clara", "Beatriz", "Joana"},
		say: []string{
			"By the way, my sister's name is {v}, she might join us for the trip.",
			"My older sister {v} is coming to stay with me for a few weeks.",
			"Did I mention my sister? She's called {v} and she's a nightmare at board games.",
		},
		ack: []string{
			"How nice! I'll remember that your sister is {v}. Having family along usually makes a trip more fun, as long as everyone agrees on the schedule.",
			"That sounds fun, say hi to her from me. A few weeks is long enough to show her your favourite places without rushing.",
			"Sisters and board games, a classic combination. Maybe pick a cooperative game so nobody ends the evening sulking.",
		},
		ask: []string{
			"What's my sister called again?",
			"Remind me, what is my sister's name?",
			"Which sister of mine did I say was visiting?",
		},
	},
	{
		name:   "budget",
		values: []string{"4,200 euros", "3,750 euros", "5,900 euros", "2,480 euros", "6,150 euros"},
		extra:  []string{"kitchen", "bathroom", "attic", "garden shed"},
		say: []string{
			"We agreed the budget for the {x} renovation is {v}, not a cent more.",
			"After a long chat with the builder we agreed on {v} as the {x} renovation budget.",
		},
		ack: []string{
			"Noted: {v} for the {x} renovation. It's worth keeping about ten percent aside for surprises, builders almost always find something.",
			"Good to have a firm number for the {x} work. Ask the builder for a written quote so there are no arguments later.",
		},
		ask: []string{
			"How much did we agree to spend on the {x} renovation?",
			"What was the renovation budget we agreed for the {x}?",
		},
		update: &factUpdate{
			say: []string{
				"Quick update on the {x} renovation: the budget went up to {v} because of the plumbing.",
				"The builder found damp, so the {x} renovation budget is now {v}.",
			},
			ack: []string{
				"Understood, the {x} budget is now {v}. Damp and plumbing are the classic hidden costs, so it's better they turned up now.",
				"Ouch. At least the damp was found early, before the new tiles went on; fixing it later would have cost much more.",
			},
			ask: []string{
				"What is the budget for the {x} renovation now?",
				"How much can we spend on the {x} renovation after the latest change?",
			},
		},
	},
	{
		name:   "moved",
		values: []string{"Porto", "Valencia", "Ghent", "Tallinn", "Bergen", "Gdansk", "Aarhus"},
		extra:  []string{"March", "April", "September", "October"},
		say: []string{
			"I moved to {v} in {x}, so I'm still finding my way around.",
			"Since I moved to {v} back in {x} I've barely unpacked.",
		},
		ack: []string{
			"{v} is a lovely place to live, give it time. It takes a few months before a new city feels like home.",
			"Moving is exhausting. Take your time unpacking and do one room at a time; the boxes aren't going anywhere.",
		},
		ask: []string{
			"Which city did I move to this year?",
			"Where do I live these days?",
		},
		update: &factUpdate{
			say: []string{
				"Big news: I moved to {v} last week, the job there finally came through.",
				"I relocated to {v} after all, new flat and everything.",
			},
			ack: []string{
				"Congratulations on the move to {v}! New job, new city; that's a lot of change at once, so be kind to yourself for a while.",
				"A new flat, how exciting. Good luck settling in, and find a good bakery nearby first; priorities.",
			},
			ask: []string{
				"Where am I living now?",
				"Which city did I relocate to most recently?",
			},
		},
	},
	{
		name:   "dog",
		values: []string{"Biscuit", "Nacho", "Mochi", "Rufus", "Pickle", "Waffles"},
		say: []string{
			"Our dog is called {v}, he's a total clown at the beach.",
			"We adopted a rescue dog last spring and named him {v}.",
		},
		ack: []string{
			"{v} sounds like a great companion. Clowns make the best beach dogs, as long as they stay away from other people's picnics.",
			"Rescue dogs are the best. Enjoy the walks, and give him time; rescues often need a few months to fully relax.",
		},
		ask: []string{
			"What's the name of our dog?",
			"What did we name the rescue dog?",
		},
	},
	{
		name:   "allergy",
		values: []string{"peanuts", "shellfish", "penicillin", "sesame", "kiwi"},
		say: []string{
			"Just so you know, I'm allergic to {v}, so keep that in mind for recipes.",
			"I found out at the clinic that I'm allergic to {v}.",
		},
		ack: []string{
			"Thanks, I'll keep {v} out of any suggestions. Always check the labels too, traces turn up in surprising places.",
			"Good that you found out. I'll keep it in mind, and it's worth telling restaurants when you order.",
		},
		ask: []string{
			"What was I allergic to again?",
			"Which allergy did the clinic find?",
		},
	},
	{
		name:   "plan",
		values: []string{"blue plan", "green plan", "orange plan", "silver plan"},
		extra:  []string{"website", "product launch", "rebrand", "onboarding"},
		say: []string{
			"Okay, we settled on the {v} for the {x}, the other one was too risky.",
			"Let's go with the {v} for the {x}, I've made up my mind.",
		},
		ack: []string{
			"Great, the {v} it is for the {x}. I'll draft the next steps so the team can start on Monday.",
			"Good call. I'll plan around it and flag anything that might put the timeline at risk.",
		},
		ask: []string{
			"Which plan did we settle on for the {x}?",
			"What did we decide about the {x} plan?",
		},
	},
	{
		name:   "flight",
		values: []string{"12 June", "3 May", "21 August", "9 November", "28 February"},
		extra:  []string{"Oslo", "Vienna", "Dublin", "Krakow", "Seville"},
		say: []string{
			"My flight to {x} leaves on {v}, early in the morning.",
			"I finally booked the {x} trip, the flight is on {v}.",
		},
		ack: []string{
			"Noted, {x} on {v}. Set two alarms, and check in online the day before to save time at the airport.",
			"Exciting! {x} is wonderful at that time of year. Pack a warm layer, evenings can be cool.",
		},
		ask: []string{
			"When does my flight to {x} leave?",
			"What date did I book for the {x} trip?",
		},
	},
	{
		name:   "job",
		values: []string{"landscape architect", "physiotherapist", "sound engineer", "veterinary nurse", "structural engineer"},
		say: []string{
			"I work as a {v}, so my hours are all over the place.",
			"I'm a {v}, and this week has been brutal.",
		},
		ack: []string{
			"That sounds like demanding work. Irregular hours make it hard to keep a routine, so protect your sleep when you can.",
			"Being a {v} must keep you busy. I hope next week is calmer.",
		},
		ask: []string{
			"What do I do for a living?",
			"What's my profession?",
		},
	},
	{
		name:   "name",
		values: []string{"Bruno", "Tiago", "Helena", "Yara", "Duarte", "Noemi"},
		say: []string{
			"Hi, my name is {v}, nice to finally talk properly.",
			"Call me {v}, everyone does.",
		},
		ack: []string{
			"Nice to meet you, {v}! What can I help you with today?",
			"Hello! Happy to help with whatever you need, big or small.",
		},
		ask: []string{
			"Do you remember my name?",
			"What's my name?",
		},
	},
	{
		name:   "food",
		values: []string{"Ethiopian food", "Sichuan cooking", "Georgian dumplings", "Peruvian ceviche"},
		say: []string{
			"I really love {v}, I could eat it every week.",
			"Honestly I love {v} more than anything else.",
		},
		ack: []string{
			"Great taste! {v} is fantastic, and there are good cookbooks if you ever want to try it at home.",
			"Good choice, it's hard to beat. Have you found a good place nearby?",
		},
		ask: []string{
			"What kind of food do I love?",
			"Which cuisine did I say I could eat every week?",
		},
	},
	{
		name:   "car",
		values: []string{"green Volvo", "white Fiat Panda", "red Skoda", "grey Mazda"},
		say: []string{
			"I drive a {v}, it's ancient but it never lets me down.",
			"My car is a {v} that I bought second hand.",
		},
		ack: []string{
			"Reliable beats shiny every time. Keep up with the servicing and it will last for years.",
			"Second hand is the smart way to buy a car; someone else paid for the worst of the depreciation.",
		},
		ask: []string{
			"What car do I drive?",
			"Which car did I buy second hand?",
		},
	},
	{
		name:   "anniversary",
		values: []string{"14 September", "2 April", "30 July", "17 January"},
		say: []string{
			"Our wedding anniversary is on {v}, remind me to book something.",
			"Don't let me forget our anniversary on {v}.",
		},
		ack: []string{
			"I'll keep {v} in mind. Booking a restaurant a few weeks ahead gives you the best choice.",
			"Anniversaries deserve a nice dinner. I'll remind you closer to the date.",
		},
		ask: []string{
			"When is our wedding anniversary?",
			"What date is our anniversary?",
		},
	},
	{
		name:   "dentist",
		values: []string{"Thursday at 3pm", "Monday at 10am", "Friday at 8:30am", "Wednesday at 5pm"},
		say: []string{
			"My dentist appointment is on {v}, I'm already dreading it.",
			"I booked the dentist for {v}, finally.",
		},
		ack: []string{
			"You'll be fine. {v} it is; most check-ups are over before you know it.",
			"Good that it's booked. Putting it off only makes it worse.",
		},
		ask: []string{
			"When did I say the dentist appointment was?",
			"What time is my dentist visit?",
		},
		update: &factUpdate{
			say: []string{
				"The dentist called and moved my appointment to {v}.",
				"Change of plan: the dentist appointment is now {v}.",
			},
			ack: []string{
				"Updated: the dentist on {v}. I hope the new time suits you better.",
				"Annoying, but at least they called instead of cancelling on the day.",
			},
			ask: []string{
				"When is the dentist appointment now that it moved?",
				"What's the new time for my dentist appointment?",
			},
		},
	},
	{
		name:   "manager",
		values: []string{"Tomas", "Greta", "Olu", "Priya", "Henrik"},
		say: []string{
			"My manager is called {v} and actually listens, which is rare.",
			"I had a one-to-one with my manager {v} today, it went well.",
		},
		ack: []string{
			"A manager who listens is worth a lot. It makes the hard weeks much easier.",
			"Glad the one-to-one went well. Those conversations set the tone for the next few months.",
		},
		ask: []string{
			"Who is my manager?",
			"What's the name of my manager at work?",
		},
	},
	{
		name:   "wifi",
		values: []string{"otter-blue-77", "maple-tide-42", "copper-fern-19", "quiet-heron-63"},
		say: []string{
			"The wifi password at the cabin is {v}, write it down somewhere for me.",
			"For the cabin wifi, the password is {v}.",
		},
		ack: []string{
			"Got it, the cabin password is saved here. Enjoy the quiet up there.",
			"Noted. Enjoy the cabin! Sounds like a perfect place to switch off.",
		},
		ask: []string{
			"What's the wifi password for the cabin?",
			"Can you remind me of the cabin password?",
		},
	},
	{
		name:   "school",
		values: []string{"Riverside Primary", "Oakfield Primary", "St Brendan's", "Hillcrest Primary"},
		say: []string{
			"My son started at {v} this term and he loves it.",
			"We enrolled our son at {v}, it's a short walk from home.",
		},
		ack: []string{
			"That's great news about your son. Loving school in the first term is a very good sign.",
			"A short walk to school makes mornings so much easier, and he'll make friends in the neighbourhood.",
		},
		ask: []string{
			"Which school does my son go to?",
			"Where did we enrol our son?",
		},
	},
	{
		name:   "lessons",
		values: []string{"cello", "pottery", "salsa", "bouldering"},
		say: []string{
			"I signed up for {v} lessons on Tuesday evenings.",
			"I started taking {v} lessons, my teacher is very patient.",
		},
		ack: []string{
			"{v} is a great thing to learn. A fixed weekly slot makes it much easier to stick with.",
			"Patient teachers make all the difference, especially in the first few months.",
		},
		ask: []string{
			"What lessons did I sign up for?",
			"What am I taking lessons in?",
		},
	},
	{
		name:   "bookclub",
		values: []string{"The Remains of the Day", "Middlemarch", "Piranesi", "The Leopard"},
		say: []string{
			"Our book club is reading {v} this month.",
			"The book club picked {v} for our next meeting.",
		},
		ack: []string{
			"Good pick! I hope the discussion goes well; books like that divide people in interesting ways.",
			"{v} should make for a lively book club. Bring snacks, the long ones need fuel.",
		},
		ask: []string{
			"What is my book club reading?",
			"Which novel did the book club pick?",
		},
	},
	{
		name:   "parking",
		values: []string{"level 4B", "level 2C", "level 6A", "level 3D"},
		say: []string{
			"I parked on {v} of the airport garage, remind me when I land.",
			"Note for later: the car is on {v} at the airport parking.",
		},
		ack: []string{
			"Will do. Safe travels! Take a photo of the sign next time too, it's the easiest reminder.",
			"Noted, {v} at the airport. I'll remind you when you're back.",
		},
		ask: []string{
			"Which level did I park on at the airport?",
			"Where did I leave the car at the airport garage?",
		},
	},
	{
		name:   "offsite",
		values: []string{"Sintra", "Ericeira", "Evora", "Comporta"},
		say: []string{
			"We decided to hold the team offsite in {v} this year.",
			"The team agreed that the offsite will be in {v}.",
		},
		ack: []string{
			"{v} is a great choice for an offsite. Book the venue early, places there fill up fast.",
			"Sounds like a good spot for the team. A change of scenery does wonders for planning sessions.",
		},
		ask: []string{
			"Where are we holding the team offsite?",
			"Which town did the team pick for the offsite?",
		},
	},
	{
		name:   "birthday",
		values: []string{"5 December", "19 March", "23 June", "11 October"},
		say: []string{
			"My birthday is on {v}, in case you want to send cake.",
			"I'll be turning forty on {v}, no big party please.",
		},
		ack: []string{
			"I'll remember {v}! Cake is always a good idea.",
			"A quiet celebration it is. A nice dinner with a few close friends is often the best way.",
		},
		ask: []string{
			"When is my birthday?",
			"What date do I turn forty?",
		},
	},
	{
		name:   "employer",
		values: []string{"Northwind Logistics", "Lumen Labs", "Bluewater Health", "Kestrel Robotics"},
		say: []string{
			"I work for {v}, mostly on the operations side.",
			"I've been at {v} for three years now.",
		},
		ack: []string{
			"{v} sounds like an interesting place to work. Operations is where you see how everything really fits together.",
			"Three years is a good stretch. Long enough to know the place well.",
		},
		ask: []string{
			"Which company do I work for?",
			"Where have I been working for three years?",
		},
	},
	{
		name:   "policy",
		values: []string{"HX-4471-09", "QP-2083-55", "ML-7730-12", "TR-5196-40"},
		say: []string{
			"My home insurance policy number is {v}, I always lose it.",
			"For the insurance claim, the policy number is {v}.",
		},
		ack: []string{
			"Saved: policy {v}. It's also worth keeping a photo of the policy document on your phone.",
			"Good to have it handy for the claim. Keep copies of any receipts and photos of the damage too.",
		},
		ask: []string{
			"What's my insurance policy number?",
			"Which policy number do I need for the insurance claim?",
		},
	},
	{
		name:   "plant",
		values: []string{"fiddle-leaf fig", "monstera", "bird of paradise", "olive tree"},
		say: []string{
			"I bought a {v} for the living room, it needs a lot of light.",
			"The new {v} in the living room is already dropping leaves.",
		},
		ack: []string{
			"Put it near the brightest window and don't overwater it; most indoor plants die from too much care.",
			"Plants sulk after a move; give it a couple of weeks before you change anything.",
		},
		ask: []string{
			"What plant did I buy for the living room?",
			"Which plant is in my living room?",
		},
	},
	{
		name:   "marathon",
		values: []string{"3 hours 58", "4 hours 12", "3 hours 41", "4 hours 30"},
		say: []string{
			"I finished the marathon in {v}, my legs are destroyed.",
			"Official marathon time came in: {v}.",
		},
		ack: []string{
			"Congratulations, {v} is a great time! Rest properly this week, and eat well.",
			"Amazing effort. Rest those legs and walk a little each day to help them recover.",
		},
		ask: []string{
			"What was my marathon time?",
			"How long did the marathon take me?",
		},
	},
}

// fillerTopic is one theme of chit-chat: pairs of a human message and the
// assistant's answer to it, with slots from fillerSlots.
type fillerTopic [][2]string

var fillerTopics = []fillerTopic{
	{ // weather
		{"It's been {weather} all day here, I haven't left the house.",
			"Days like that are perfect for staying in. Make a pot of tea, put on some music and let yourself have a slow afternoon; the errands will still be there tomorrow."},
		{"Do you think this {weather} weather will last until {day}?",
			"Forecasts more than two days out are mostly guesswork, so I wouldn't count on it either way. It's worth checking again the evening before and keeping a backup idea ready."},
		{"The forecast says {weather} again, I'm so tired of it.",
			"Long grey spells really do wear people down. Getting outside for even twenty minutes around midday helps more than you'd expect, and a bright lamp in the morning does too."},
		{"I got soaked walking back from {place} this afternoon.",
			"Oh no! Get out of the wet clothes, have a hot shower and a warm drink. Stuffing your shoes with newspaper overnight helps them dry without losing their shape."},
	},
	{ // weekend plans
		{"Any ideas for {day}? I have no plans at all.",
			"A free day is a gift. You could try a museum you've never visited, walk somewhere new and stop at a cafe, or cook something ambitious. Sometimes doing nothing at all is the best plan."},
		{"We're thinking of going to {place} on {day}, is that a good plan?",
			"That sounds like a lovely plan. Go early to avoid the crowds, bring some water and snacks, and leave a little time to wander without a schedule."},
		{"My plans for the weekend fell through, {friend} cancelled on me.",
			"That's disappointing, especially when you were looking forward to it. Maybe treat yourself to something small, or message another friend; last-minute plans are often the most fun."},
		{"We decided to stay in on {weekday} and order pizza.",
			"Honestly that sounds perfect. A film, a pizza and no alarm the next morning is a great way to recharge after a busy week."},
		{"I need a plan for a rainy {day} with nothing to do.",
			"A film marathon, a jigsaw puzzle or a long cooking project are all good rainy-day options. You could also sort out one small corner of the house and feel productive."},
	},
	{ // cooking
		{"I tried making {dish} last night and it was a disaster.",
			"Most recipes are more forgiving than they look. Lower heat, a little more patience and tasting as you go usually fix the common problems. What went wrong, the texture or the taste?"},
		{"What goes well with {dish} for a dinner with friends?",
			"A crisp green salad with a sharp dressing and some good bread would go nicely. For dessert, something simple like fruit with yoghurt keeps the evening relaxed."},
		{"Is it fine to freeze leftover {dish}?",
			"Yes, most cooked dishes freeze well for two or three months in a sealed container. Let it cool completely first, label it with the date and thaw it in the fridge overnight."},
		{"I'm cooking {dish} tonight, any tips for the food to come out right?",
			"Prepare all the ingredients before you start, don't rush the onions and season a little at a time. Let it rest for a few minutes before serving and it will taste better."},
		{"I really like {dish} on a cold evening.",
			"Comfort food on a cold night is hard to beat. Making a double batch means you have an easy lunch the next day as well."},
	},
	{ // tv
		{"I started watching {show} and I can't stop.",
			"Binge-worthy shows are dangerous on a work night! Maybe set yourself a limit of two episodes and keep the finale for the weekend."},
		{"Have you heard anything good about {show}?",
			"Reviews seem mixed: people love the acting but some find the middle slow. It's worth watching an episode or two and deciding for yourself."},
		{"{friend} keeps telling me to watch {show}, should I?",
			"If your friend usually knows your taste, give it a try. Worst case you'll have something to talk about next time you meet."},
		{"I fell asleep halfway through {show} again.",
			"That's usually a sign you're tired rather than the show being bad. Maybe watch it earlier in the evening, or pick something lighter for late nights."},
	},
	{ // sport
		{"Did you see the {sport} results yesterday?",
			"I can't follow live games, but I hope your side did well. Was it a close one, or did it get decided early?"},
		{"I'm thinking of taking up {sport} again.",
			"That's a great idea. Start slowly, warm up properly and build up over a few weeks; most injuries happen when people jump straight back to their old level."},
		{"{friend} dragged me to watch {sport} at {place}.",
			"Live sport has a great atmosphere even if you don't follow it closely. Did you end up enjoying it?"},
		{"My knee hurts after {sport} on {day}.",
			"Rest it for a few days, use ice for the swelling and keep it raised when you can. If it still hurts after a week, it's worth having a physio or a doctor look at it."},
	},
	{ // work small talk
		{"Work was hectic today, three meetings back to back.",
			"Back-to-back meetings drain anyone. Try to take a proper break tonight, away from screens, and maybe block some focus time in your calendar for tomorrow."},
		{"I have a deadline on {day} and I'm way behind.",
			"Break the work into small pieces and start with the easiest one to get some momentum. It also helps to tell people early if something has to slip."},
		{"Our team lunch at {place} was surprisingly fun.",
			"Team lunches can be a nice reset, especially when work has been stressful. It's good to talk about something other than deadlines for once."},
		{"I spent the whole morning fighting the printer at work.",
			"Printers are the natural enemy of productivity. Sometimes the fastest fix is to print to another printer and leave the broken one to the IT team."},
	},
	{ // money
		{"I'm trying to stick to a budget this month, it's hard.",
			"It really is. Tracking every purchase for a week shows where the money actually goes, and a small weekly allowance for treats makes the budget easier to keep."},
		{"Groceries are so expensive lately.",
			"Prices have gone up a lot. Buying seasonal produce, planning meals for the week and cooking in batches can cut the bill noticeably."},
		{"I spent way too much at {place} on {day}.",
			"It happens to everyone. Don't beat yourself up; just set a small limit for the next couple of weeks and it will balance out."},
		{"Should I cancel some streaming subscriptions to save money?",
			"Rotating them is a common trick: keep one at a time, watch what you wanted on it, then switch. You rarely miss the others."},
	},
	{ // travel in general
		{"I'd love a weekend away in {city}, have you any tips?",
			"Walk the old centre early in the morning, before the tour groups arrive, and eat where the locals queue. Booking a museum slot in advance saves a lot of waiting."},
		{"{friend} just got back from {city} and won't stop talking about it.",
			"Sounds like a great trip! Ask for their favourite restaurant and the one thing they would skip; that's the most useful travel advice there is."},
		{"Is {city} nice in the winter?",
			"Winter can be lovely there: fewer crowds, cheaper hotels and cosy cafes. Just pack layers and good shoes for the cold and the rain."},
		{"Flight prices to {city} are ridiculous right now.",
			"Prices often drop for midweek flights, and setting a price alert helps you catch a good deal. Flying from a smaller airport can be cheaper too."},
	},
	{ // tech
		{"My laptop is so slow since the last update.",
			"Restarting it properly and checking what runs at startup often helps. If it's still slow, the update may be indexing files in the background for a day or two."},
		{"I keep forgetting my email password and resetting it.",
			"A password manager would save you a lot of resets: you remember one strong passphrase and it remembers the rest. Turn on two-factor login while you're at it."},
		{"My phone battery dies by lunchtime.",
			"Check in the settings which apps use the most battery; it's often one misbehaving app. Lowering the screen brightness and turning off background refresh helps too."},
		{"The printer at home stopped connecting to the network again.",
			"Turning the router and the printer off and on again fixes it surprisingly often. Giving the printer a fixed address in the router settings stops it from happening again."},
		{"I hate waiting for software updates to install.",
			"Everyone does. Scheduling them overnight means you never have to watch the progress bar."},
	},
	{ // pets and animals
		{"There was a huge dog at {place} today, bigger than a pony.",
			"Big dogs are often the gentlest ones. Did you get to say hello, or was it too busy with its owner?"},
		{"My neighbour's cat keeps sleeping on our doorstep.",
			"Sounds like the cat has adopted you! Cats pick a few favourite spots in the neighbourhood, and yours is clearly one of them."},
		{"{friend} is thinking about getting a puppy.",
			"Puppies are a lot of work in the first months: training, walks and chewed shoes. But if they have the time, it's very rewarding."},
		{"Birds woke me up at five this morning.",
			"Spring mornings can be loud! Earplugs or a fan for some background noise might save your sleep."},
	},
	{ // books and learning
		{"I'm reading a book about {thing} and it's fascinating.",
			"Popular science books are a great way into a subject. Once you finish, the references at the back are a good guide to what to read next."},
		{"Can you recommend a podcast about {thing}?",
			"There are several good ones. I'd start with an introductory series from a museum or a university, then follow the guests you like."},
		{"I want to learn more about {thing} this year.",
			"Setting a small weekly goal, like one chapter or one documentary, makes learning stick. Writing a few notes afterwards helps you remember it."},
		{"I have a stack of unread books by my bed.",
			"Everyone does. Pick the shortest one first; finishing a book gives you the momentum for the next."},
	},
	{ // errands and appointments
		{"I need to book a haircut appointment before {day}.",
			"Booking online is usually faster than calling, and early morning slots tend to be free. Do it now before you forget!"},
		{"The post office queue took forty minutes today.",
			"That's painful. Mornings right after opening tend to be quieter, and some services can be done online or at a parcel locker."},
		{"I finally fixed the leaking tap in the bathroom.",
			"Well done, that's a satisfying job to finish, and it will save water too. Was it just the washer?"},
		{"I have to pick up a parcel from {place} on {day}.",
			"Take the ID they ask for and the tracking number; some places are strict. Going early avoids the afternoon queue."},
		{"I can never remember the name of that cafe near {place}.",
			"Searching the map for cafes near there and looking at the photos usually jogs the memory. Save it as a favourite once you find it."},
	},
	{ // friends and family small talk
		{"I had dinner with {friend} and we talked for hours.",
			"Long dinners with friends are the best. It's good to make time for that, even when life is busy."},
		{"{friend} wants to throw a party for my cousin.",
			"A party sounds fun! Offer to help with the food or the music, and the planning will be much less stressful for everyone."},
		{"My mum called to ask about {day}.",
			"It's nice that she checks in. Are you planning to visit her, or is she coming to you?"},
		{"It's {friend}'s birthday soon and I have no gift idea.",
			"An experience makes a good gift: a class, a concert or a nice dinner out. A book you loved, with a note inside, is also a safe choice."},
	},
	{ // music
		{"I've had the same song stuck in my head all day.",
			"Listening to the whole song once, start to finish, usually breaks the loop. Chewing gum supposedly helps too, oddly enough."},
		{"{friend} got us tickets for a concert at {place}.",
			"Lucky you, live music is the best. Bring earplugs if it's a loud venue; you'll still hear everything, just without the ringing afterwards."},
		{"I'm thinking of buying a cheap keyboard to play at home.",
			"A keyboard with weighted keys is a good start, even a second-hand one. Ten minutes a day goes further than an hour once a week."},
		{"What music helps you focus?",
			"Instrumental music without lyrics works well for many people: soundtracks, classical or ambient playlists. Keeping the volume low helps too."},
		{"I love jazz on a lazy {weekday} morning.",
			"That sounds like the perfect start to the day. Coffee, jazz and nowhere to be."},
	},
}

// closers are follow-up sentences an assistant often adds to an answer;
// the generator appends one to about half of the answers (filler and
// acknowledgements alike), so answers vary in length as real ones do.
var closers = []string{
	"Let me know how it goes.",
	"Happy to help if you want to talk it through.",
	"Is there anything else on your mind today?",
	"I can give you a few more ideas if that helps.",
	"Tell me more if you feel like it.",
	"Fingers crossed it all works out.",
	"Shall I remind you about it later?",
	"It sounds like you have a lot going on this week.",
	"That's a good question, by the way.",
	"Take care of yourself in the meantime.",
	"I'm curious what you end up choosing.",
	"Small steps add up faster than you think.",
}

// fillerSlots fills the {slot}s of filler templates. None of these words
// is a fact value (see the rules at the top of this file).
var fillerSlots = map[string][]string{
	"weather": {"rainy", "windy", "foggy", "grey", "freezing", "humid"},
	"day":     {"Saturday", "Sunday", "Friday", "the weekend", "next week"},
	"weekday": {"Saturday", "Sunday", "Friday"},
	"place":   {"the market", "the park", "the old town", "the harbour", "the library", "the mall"},
	"friend":  {"Dave", "Kim", "Sam", "Leo", "Nora", "Ravi"},
	"dish":    {"lasagne", "a vegetable curry", "pancakes", "a frittata", "banana bread", "gazpacho"},
	"show":    {"a crime drama", "that baking show", "a space documentary", "a period drama"},
	"sport":   {"football", "tennis", "basketball", "volleyball"},
	"city":    {"Paris", "Madrid", "Rome", "Berlin", "Prague", "Amsterdam"},
	"thing":   {"the deep sea", "ancient Rome", "volcanoes", "the history of maps", "bees"},
}
