package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/storekit"
)

// FuzzStoredValue fuzzes what the PostgreSQL store does with a message body
// it did not write: each input replaces, through a second pool, the body
// column of a stored message of the shared test server (as a corrupting
// process or a hand edit would), which is then read back with All and Last.
// The store decodes rows with storekit.DecodeRecord (package store's
// FuzzDecodeMessage covers the codec itself); this checks the path from the
// bytea column to the caller. It needs the PostgreSQL test server (skipped
// without one, as every test here).
//
// Properties: no panic; a body DecodeMessage rejects makes All and Last
// return an error wrapping store.ErrCorrupt that names the identity and the
// Seq, and leaves another identity readable; a body it accepts comes back as
// exactly that message with the row's Seq.
//
// The seeds below and testdata/fuzz/FuzzStoredValue run with every `go
// test`; to search longer (each fuzzing worker starts its own server):
//
//	go test ./store/pgstore -run '^$' -fuzz '^FuzzStoredValue$' -fuzztime 10m
func FuzzStoredValue(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"type":"human","content":"Hi"}`,
		`{"v":1,"type":"system","content":"Be brief."}`,
		`{"v":1,"type":"ai","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
		`{"v":1,"type":"generic","content":"c","role":"r","name":"n"}`,
		"{\"v\":1,\"type\":\"human\",\"content\":\"a\\u0000b\"}",
		`{"v":2,"type":"human","content":"future"}`,
		`{"v":1,"type":"human","content":"x","role":"r"}`,
		`not json`,
		``,
		"\x00\x00",
		"\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	prefix := freshPrefix("fuzz")
	s := open(f, pgstore.WithTablePrefix(prefix))
	pool, err := pgxpool.New(ctx, testsvc.Postgres(f))
	if err != nil {
		f.Fatalf("a second pool: %v", err)
	}
	f.Cleanup(pool.Close)
	victim := memstack.Identity{Tenant: "fuzz", User: "victim:{*}"}
	bystander := memstack.Identity{Tenant: "fuzz", User: "bystander"}
	if err := s.Append(ctx, victim, human("to be overwritten")); err != nil {
		f.Fatalf("Append: %v", err)
	}
	if err := s.Append(ctx, bystander, human("still readable")); err != nil {
		f.Fatalf("Append: %v", err)
	}
	rs, err := s.All(ctx, victim)
	if err != nil || len(rs) != 1 {
		f.Fatalf("All: %v, %v", rs, err)
	}
	seq := rs[0].Seq

	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := pool.Exec(ctx, "UPDATE "+prefix+"messages SET body = $1 WHERE seq = $2", data, seq); err != nil {
			t.Fatalf("replacing the body: %v", err)
		}
		want, werr := storekit.DecodeMessage(data)
		all, aerr := s.All(ctx, victim)
		last, lerr := s.Last(ctx, victim, 1)
		for op, got := range map[string]struct {
			recs []store.Record
			err  error
		}{"All": {all, aerr}, "Last": {last, lerr}} {
			if werr != nil {
				if got.err == nil {
					t.Fatalf("%s accepted a body DecodeMessage rejects (%v): %+v", op, werr, got.recs)
				}
				if !errors.Is(got.err, store.ErrCorrupt) ||
					!strings.Contains(got.err.Error(), fmt.Sprintf("Seq %d", seq)) ||
					!strings.Contains(got.err.Error(), victim.Key()) {
					t.Fatalf("%s error should wrap ErrCorrupt and name Seq %d and %q: %v", op, seq, victim.Key(), got.err)
				}
				continue
			}
			if got.err != nil {
				t.Fatalf("%s rejected a body DecodeMessage accepts: %v", op, got.err)
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
