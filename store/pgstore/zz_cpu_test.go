package pgstore_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/storetest"
)

func pgCPU(port string) time.Duration {
	ents, _ := os.ReadDir("/proc")
	pm := ""
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(b), "postgres\x00-D") && strings.Contains(string(b), "-p\x00"+port+"\x00") {
			pm = e.Name()
		}
	}
	var total int64
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if e.Name() == pm || f[1] == pm {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			total += u + s
		}
	}
	return time.Duration(total) * 10 * time.Millisecond
}

func TestZZCPU(t *testing.T) {
	dsn := testsvc.Postgres(t)
	u, _ := url.Parse(dsn)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, dsn, pgstore.WithTablePrefix(freshPrefix("cpu")))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.Measure(ctx, s, 32, 20)
	c0 := pgCPU(u.Port())
	t0 := time.Now()
	res, err := storetest.Measure(ctx, s, 32, 150)
	if err != nil {
		t.Fatal(err)
	}
	c1 := pgCPU(u.Port())
	fmt.Printf("%v; server CPU %v for %d saves = %v/save; wall %v\n", res, c1-c0, res.Saves, (c1-c0)/time.Duration(res.Saves), time.Since(t0))
}

func TestZZCPUSplit(t *testing.T) {
	dsn := testsvc.Postgres(t)
	u, _ := url.Parse(dsn)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, dsn, pgstore.WithTablePrefix(freshPrefix("cpus")))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(name string, f func(i, n int) error) {
		c0 := pgCPU(u.Port())
		t0 := time.Now()
		done := make(chan error)
		for g := 0; g < 32; g++ {
			go func() {
				for n := 0; n < 150; n++ {
					if err := f(g, n); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
		for g := 0; g < 32; g++ {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		c1 := pgCPU(u.Port())
		fmt.Printf("%s: server CPU %v/op; wall %v/op\n", name, (c1-c0)/4800, time.Since(t0)/4800)
	}
	id := func(g int) memstack.Identity { return memstack.Identity{User: fmt.Sprint("u", g)} }
	run("append", func(g, n int) error { return s.Append(ctx, id(g), human("hello there how are you"), ai("fine thanks and you")) })
	run("last", func(g, n int) error { _, err := s.Last(ctx, id(g), 10); return err })
	run("stat", func(g, n int) error { _, err := s.Stat(ctx, id(g)); return err })
	run("select1", func(g, n int) error { _, err := s.GetState(ctx, id(g), "x"); return err })
}
