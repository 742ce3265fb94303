package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/store/storekit"
)

// FuzzStoredValue fuzzes what the SQLite store does with a message column
// it did not write: each input is inserted as the message BLOB of a row of
// a real database file (through a second connection, as a corrupting
// process or a hand edit would), then read back with All and Last. The
// store decodes rows with storekit.DecodeRecord (package store's
// FuzzDecodeMessage covers the codec itself); this checks the path from the
// column to the caller.
//
// Properties: no panic; a value DecodeMessage rejects makes All and Last
// return an error wrapping store.ErrCorrupt that names the identity and the
// Seq, and leaves another identity readable; a value it accepts comes back
// as exactly that message with the row's Seq.
//
// The seeds below and testdata/fuzz/FuzzStoredValue run with every `go
// test`; to search longer:
//
//	go test ./store/sqlitestore -run '^$' -fuzz '^FuzzStoredValue$' -fuzztime 10m
func FuzzStoredValue(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"type":"human","content":"Hi"}`,
		`{"v":1,"type":"system","content":"Be brief."}`,
		`{"v":1,"type":"ai","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
		`{"v":1,"type":"ai","content":"x","tool_calls":[]}`,
		`{"v":1,"type":"generic","content":"c","role":"r","name":"n"}`,
		`{"v":1,"type":"tool","content":"42","id":"call_1"}`,
		"{\"v\":1,\"type\":\"human\",\"content\":\"a\\u0000b\"}",
		`{"v":2,"type":"human","content":"future"}`,
		`{"v":1,"type":"robot","content":"?"}`,
		`{"v":1,"type":"human"}`,
		`not json`,
		``,
		"\x00\x00\x00",
		"\xff\xfe",
		`{"v":1,"type":"human","content":"x"} {}`,
	} {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	path := filepath.Join(f.TempDir(), "fuzz.db")
	s, err := sqlitestore.Open(ctx, path, sqlitestore.WithNamespace("fuzz"))
	if err != nil {
		f.Fatalf("Open: %v", err)
	}
	f.Cleanup(func() { _ = s.Close() })
	raw, err := sql.Open("sqlite", path+"?_busy_timeout=5000")
	if err != nil {
		f.Fatalf("opening a second connection: %v", err)
	}
	f.Cleanup(func() { _ = raw.Close() })
	victim := memstack.Identity{Tenant: "fuzz", User: "victim:{*}"}
	bystander := memstack.Identity{Tenant: "fuzz", User: "bystander"}
	if err := s.Append(ctx, bystander, llms.HumanChatMessage{Content: "still readable"}); err != nil {
		f.Fatalf("Append: %v", err)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := raw.ExecContext(ctx,
			`INSERT INTO memstack_messages (ns, identity, system, message) VALUES (?, ?, 0, ?)`,
			"fuzz", victim.Key(), data)
		if err != nil {
			t.Fatalf("inserting the value: %v", err)
		}
		seq, err := res.LastInsertId()
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := raw.ExecContext(ctx, `DELETE FROM memstack_messages WHERE seq = ?`, seq); err != nil {
				t.Fatalf("removing the value: %v", err)
			}
		}()

		want, werr := storekit.DecodeMessage(data)
		all, aerr := s.All(ctx, victim)
		last, lerr := s.Last(ctx, victim, 1)
		for op, got := range map[string]struct {
			recs []store.Record
			err  error
		}{"All": {all, aerr}, "Last": {last, lerr}} {
			if werr != nil {
				if got.err == nil {
					t.Fatalf("%s accepted a value DecodeMessage rejects (%v): %+v", op, werr, got.recs)
				}
				if !errors.Is(got.err, store.ErrCorrupt) ||
					!strings.Contains(got.err.Error(), fmt.Sprintf("Seq %d", seq)) ||
					!strings.Contains(got.err.Error(), victim.Key()) {
					t.Fatalf("%s error should wrap ErrCorrupt and name Seq %d and %q: %v", op, seq, victim.Key(), got.err)
				}
				continue
			}
			if got.err != nil {
				t.Fatalf("%s rejected a value DecodeMessage accepts: %v", op, got.err)
			}
			if len(got.recs) != 1 || got.recs[0].Seq != seq || !reflect.DeepEqual(got.recs[0].Message, want) {
				t.Fatalf("%s = %+v, want Seq %d and %#v", op, got.recs, seq, want)
			}
		}
		other, err := s.All(ctx, bystander)
		if err != nil || len(other) != 1 || other[0].Message.GetContent() != "still readable" {
			t.Fatalf("another identity is no longer readable: %+v, %v", other, err)
		}
	})
}
