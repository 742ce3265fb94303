package zz

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/store/storetest"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestCPU(t *testing.T) {
	for _, c := range []struct{ conv, turns int }{{1, 6000}, {32, 200}} {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"))
		if err != nil {
			t.Fatal(err)
		}
		c0 := cpu()
		res, err := storetest.Measure(context.Background(), s, c.conv, c.turns)
		if err != nil {
			t.Fatal(err)
		}
		used := cpu() - c0
		fmt.Printf("conv=%d %v  cpu/save=%v  => cpu-bound max on 2 cores %.0f saves/s\n", c.conv, res, used/time.Duration(res.Saves), 2/(used.Seconds()/float64(res.Saves)))
		s.Close()
	}
}
