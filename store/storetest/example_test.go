package storetest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storetest"
)

// A backend's test file runs the kit with an Opener; this one serves
// in-process stores, one per namespace. A persistent backend opens a new
// client (connection pool, *sql.DB) over the same data on every call.
func ExampleRun() {
	stores := map[string]*store.InMemory{}
	opener := func(_ testing.TB, ns string) (store.Store, error) {
		if stores[ns] == nil {
			stores[ns] = store.NewInMemory()
		}
		return stores[ns], nil
	}
	// In a _test.go file:
	//
	//	func TestConformance(t *testing.T)  { storetest.Run(t, opener) }
	//	func BenchmarkMyStore(b *testing.B) { storetest.Bench(b, opener) }
	_ = opener
}

func ExampleMeasure() {
	res, err := storetest.Measure(context.Background(), store.NewInMemory(), 8, 50)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Saves, "saves;", res.SavesPerSec > 0, res.LoadP99 >= res.LoadP50)
	// Output: 400 saves; true true
}
