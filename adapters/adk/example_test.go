package adk_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/store"
)

// text is an event of author saying s at at.
func text(id, author string, at time.Time, s string) *session.Event {
	role := genai.Role(genai.RoleModel)
	if author == "user" {
		role = genai.RoleUser
	}
	return &session.Event{ID: id, Author: author, Timestamp: at,
		LLMResponse: model.LLMResponse{Content: genai.NewContentFromText(s, role)}}
}

// A user settles something in one session; a later session of the same
// user, with another ID, finds it.
func ExampleNewMemoryService() {
	ctx := context.Background()
	st := store.NewInMemory() // sqlitestore, redisstore or pgstore in production
	sessions, err := adk.NewSessionService(st)
	if err != nil {
		log.Fatal(err)
	}
	mem, err := adk.NewMemoryService(st)
	if err != nil {
		log.Fatal(err)
	}

	created, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "monday"})
	if err != nil {
		log.Fatal(err)
	}
	day := time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC)
	for _, ev := range []*session.Event{
		text("e1", "user", day, "Book the offsite in Lisbon for 14 May."),
		text("e2", "planner", day.Add(time.Minute), "Booked: LX Factory, Lisbon, 14 May."),
	} {
		if err := sessions.AppendEvent(ctx, created.Session, ev); err != nil {
			log.Fatal(err)
		}
	}
	if err := mem.AddSessionToMemory(ctx, created.Session); err != nil {
		log.Fatal(err)
	}

	// Any later session of ana: what the runner's memory tools search.
	resp, err := mem.SearchMemory(ctx, &memory.SearchRequest{AppName: "travel", UserID: "ana", Query: "Which venue did we book?"})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range resp.Memories {
		fmt.Printf("%s %s (session %s): %s\n", e.Timestamp.Format(time.DateOnly), e.Author, e.CustomMetadata["session_id"], e.Content.Parts[0].Text)
	}
	// Output:
	// 2026-03-02 user (session monday): Book the offsite in Lisbon for 14 May.
	// 2026-03-02 planner (session monday): Booked: LX Factory, Lisbon, 14 May.
}

// Sessions keep their events and state in a memstack store; "user:" keys
// follow the user into every session, "temp:" keys are never stored.
func ExampleNewSessionService() {
	ctx := context.Background()
	sessions, err := adk.NewSessionService(store.NewInMemory())
	if err != nil {
		log.Fatal(err)
	}
	first, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana"})
	if err != nil {
		log.Fatal(err)
	}
	ev := text("e1", "user", time.Now(), "I prefer window seats.")
	ev.Actions.StateDelta = map[string]any{"user:seat": "window", "temp:draft": "x", "step": 1}
	if err := sessions.AppendEvent(ctx, first.Session, ev); err != nil {
		log.Fatal(err)
	}

	second, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana"})
	if err != nil {
		log.Fatal(err)
	}
	seat, err := second.Session.State().Get("user:seat")
	if err != nil {
		log.Fatal(err)
	}
	got, err := sessions.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: first.Session.ID()})
	if err != nil {
		log.Fatal(err)
	}
	_, tempErr := got.Session.State().Get("temp:draft")
	step, err := got.Session.State().Get("step")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("second session, user:seat =", seat)
	fmt.Println("first session: events", got.Session.Events().Len(), "step", step, "temp:draft stored:", tempErr == nil)
	// Output:
	// second session, user:seat = window
	// first session: events 1 step 1 temp:draft stored: false
}
