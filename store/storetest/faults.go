package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// FaultProxy is a TCP proxy between a store's client and its server that
// loses replies on request: the server has run the command, the client
// never hears the answer and sees its connection drop — what a network
// partition or a server failover does to a client at the worst moment.
// RunFaults drives it; backends may use it in their own tests.
type FaultProxy struct {
	ln     net.Listener
	target string
	// drop counts down the server-to-client chunks still to pass before
	// one is dropped (0: none is dropped).
	drop    atomic.Int64
	dropped atomic.Int64
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// NewFaultProxy listens on 127.0.0.1 and forwards every connection to
// target (host:port). It is closed when the test ends.
func NewFaultProxy(tb testing.TB, target string) *FaultProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("storetest: FaultProxy: %v", err)
	}
	p := &FaultProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// Addr is the proxy's address (host:port), to give the store's client.
func (p *FaultProxy) Addr() string { return p.ln.Addr().String() }

// DropReply makes the proxy drop the n-th reply chunk the server sends
// from now on (n >= 1), on whichever connection it comes, and close that
// connection: the command it answers has run on the server.
func (p *FaultProxy) DropReply(n int) { p.drop.Store(int64(n)) }

// Disarm cancels a DropReply that has not fired, and reports whether one
// fired since the last Disarm.
func (p *FaultProxy) Disarm() bool {
	p.drop.Store(0)
	return p.dropped.Swap(0) > 0
}

func (p *FaultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.pipe(s, c, false) }()
		go func() { defer p.wg.Done(); p.pipe(c, s, true) }()
	}
}

// pipe copies from src to dst; for replies (server to client) it drops
// the chunk DropReply asked for and closes both ends.
func (p *FaultProxy) pipe(dst, src net.Conn, replies bool) {
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if replies {
				if left := p.drop.Load(); left > 0 && p.drop.CompareAndSwap(left, left-1) && left == 1 {
					p.dropped.Add(1)
					return // the reply is lost with the connection
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *FaultProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// FaultOpener opens a store over namespace ns whose client connects to
// addr (a FaultProxy in front of the backend's server) instead of the
// server itself.
type FaultOpener func(tb testing.TB, ns, addr string) (store.Store, error)

// RunFaults runs the fault cases against a network backend: its server
// listens on server (host:port) and open connects a store through the
// address it is given. Each case puts a FaultProxy in between and loses
// one reply at every point of a write in turn (the first reply after the
// call starts, the second, …): however the call ends, nothing is stored
// twice, a call that returned nil stored its data, and a compare-and-set
// never reports its own successful write as a conflict (a caller would
// apply its update twice on retry).
func RunFaults(t *testing.T, server string, open FaultOpener) {
	t.Helper()
	k := &kit{prefix: randomHex(4)}
	for _, c := range []struct {
		name string
		run  func(t *testing.T, s store.Store, p *FaultProxy)
	}{
		{"AppendExactlyOnceWhenAReplyIsLost", faultAppend},
		{"PutStateExactlyOnceWhenAReplyIsLost", faultPutState},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := NewFaultProxy(t, server)
			ns := fmt.Sprintf("fl%s_%d", k.prefix, k.n.Add(1))
			s, err := open(t, ns, p.Addr())
			require.NoError(t, err, "opening the store through the proxy")
			if cl, ok := s.(io.Closer); ok {
				t.Cleanup(func() { _ = cl.Close() })
			}
			c.run(t, s, p)
		})
	}
}

const faultPoints = 8

func faultAppend(t *testing.T, s store.Store, p *FaultProxy) {
	id := memstack.Identity{Tenant: "acme", User: "faults", Conversation: "append"}
	ctx := context.Background()
	require.NoError(t, s.Append(ctx, id, human("warm up")), "the proxy passes traffic")
	fired := 0
	for n := 1; n <= faultPoints; n++ {
		w := fmt.Sprintf("turn %d", n)
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		p.DropReply(n)
		err := s.Append(cctx, id, human(w), ai(w))
		if p.Disarm() {
			fired++
		}
		cancel()
		var rs []store.Record
		require.Eventually(t, func() bool {
			var rerr error
			rs, rerr = s.All(ctx, id)
			return rerr == nil
		}, 10*time.Second, 10*time.Millisecond, "the store recovers from a lost reply")
		got := 0
		for _, r := range rs {
			if r.Message.GetContent() == w {
				got++
			}
		}
		if err == nil {
			assert.Equal(t, 2, got, "lost reply %d: an Append that returned nil stored its turn once, found %d of its messages", n, got)
		} else {
			assert.Contains(t, []int{0, 2}, got, "lost reply %d: an Append that failed (%v) stored %d of its 2 messages", n, err, got)
		}
	}
	assert.Positive(t, fired, "no reply was lost: the proxy is not in the client's path")
}

func faultPutState(t *testing.T, s store.Store, p *FaultProxy) {
	id := memstack.Identity{Tenant: "acme", User: "faults", Conversation: "state"}
	ctx := context.Background()
	// A first write through the proxy, so the replies the loop loses are
	// those of the PutState itself, not of a backend's set-up (a script
	// load, a prepared statement).
	warm, err := s.GetState(ctx, id, "warm-up")
	require.NoError(t, err)
	_, err = s.PutState(ctx, id, "warm-up", []byte("x"), warm.Version)
	require.NoError(t, err, "the proxy passes traffic")
	fired := 0
	for n := 1; n <= faultPoints; n++ {
		var st store.State
		require.Eventually(t, func() bool {
			var err error
			st, err = s.GetState(ctx, id, "counter")
			return err == nil
		}, 10*time.Second, 10*time.Millisecond)
		val := []byte(fmt.Sprintf("value %d", n))
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		p.DropReply(n)
		v, err := s.PutState(cctx, id, "counter", val, st.Version)
		if p.Disarm() {
			fired++
		}
		cancel()
		var after store.State
		require.Eventually(t, func() bool {
			var gerr error
			after, gerr = s.GetState(ctx, id, "counter")
			return gerr == nil
		}, 10*time.Second, 10*time.Millisecond)
		switch {
		case err == nil:
			assert.Equal(t, store.State{Value: val, Version: v}, after, "lost reply %d: a PutState that returned nil stored its value", n)
		case errors.Is(err, store.ErrConflict):
			assert.NotEqual(t, string(val), string(after.Value), "lost reply %d: PutState reported its own successful write as a conflict", n)
		default:
			// Unknown outcome: stored or not, but whole.
			if after.Version != st.Version {
				assert.Equal(t, string(val), string(after.Value), "lost reply %d", n)
			}
		}
	}
	assert.Positive(t, fired, "no reply was lost: the proxy is not in the client's path")
}
