package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
)

func TestZZUser(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "u.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []store.Store{s, store.NewInMemory()} {
		r, err := measureUserRecall(ctx, st, []int{100, 1000}, 20)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range r {
			t.Logf("%T %d convs: cold p50 %v p95 %v load p50 %v p95 %v save %v conv %v", st, u.conversations, u.coldP50, u.coldP95, u.loadP50, u.loadP95, u.saveUser, u.saveConv)
		}
	}
}
