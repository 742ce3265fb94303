package storetest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
	"github.com/memstack/memstack/store/storetest"
)

// RunFaults must catch a network store that retries a write blindly when
// a reply is lost. toyServer holds an InMemory and runs Append and
// PutState requests sent over TCP, one JSON line each; toyStore sends
// them, and with blindRetry sends a request again on a new connection
// when the reply does not come — as go-redis did with memstack's append
// script. Its other methods read the server's InMemory directly.

type toyRequest struct {
	Op     string            `json:"op"`
	ID     memstack.Identity `json:"id"`
	Msgs   []json.RawMessage `json:"msgs,omitempty"`
	Name   string            `json:"name,omitempty"`
	Value  []byte            `json:"value,omitempty"`
	Expect int64             `json:"expect,omitempty"`
}

type toyReply struct {
	Version  int64  `json:"version"`
	Err      string `json:"err,omitempty"`
	Conflict bool   `json:"conflict,omitempty"`
}

func startToyServer(t *testing.T) (string, *store.InMemory) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	mem := store.NewInMemory()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					var req toyRequest
					var rep toyReply
					if err := json.Unmarshal(line, &req); err != nil {
						rep.Err = err.Error()
					} else {
						rep = serveToy(mem, req)
					}
					out, _ := json.Marshal(rep)
					if _, err := c.Write(append(out, '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), mem
}

func serveToy(mem *store.InMemory, req toyRequest) toyReply {
	ctx := context.Background()
	switch req.Op {
	case "append":
		msgs := make([]llms.ChatMessage, len(req.Msgs))
		for i, raw := range req.Msgs {
			m, err := storekit.DecodeMessage(raw)
			if err != nil {
				return toyReply{Err: err.Error()}
			}
			msgs[i] = m
		}
		if err := mem.Append(ctx, req.ID, msgs...); err != nil {
			return toyReply{Err: err.Error()}
		}
		return toyReply{}
	case "put":
		v, err := mem.PutState(ctx, req.ID, req.Name, req.Value, req.Expect)
		if err != nil {
			return toyReply{Err: err.Error(), Conflict: errors.Is(err, store.ErrConflict)}
		}
		return toyReply{Version: v}
	}
	return toyReply{Err: "unknown op " + req.Op}
}

type toyStore struct {
	*store.InMemory // reads, and the rest, go to the server's memory directly
	addr            string
	blindRetry      bool
}

// call sends req on a new connection; a lost reply is an error, or, with
// blindRetry, a reason to send it again.
func (s toyStore) call(ctx context.Context, req toyRequest) (toyReply, error) {
	for attempt := 0; ; attempt++ {
		rep, err := s.once(ctx, req)
		if err == nil || !s.blindRetry || attempt == 2 {
			return rep, err
		}
	}
}

func (s toyStore) once(ctx context.Context, req toyRequest) (toyReply, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return toyReply{}, err
	}
	defer c.Close()
	line, _ := json.Marshal(req)
	if _, err := c.Write(append(line, '\n')); err != nil {
		return toyReply{}, err
	}
	out, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return toyReply{}, fmt.Errorf("toy store: the reply was lost: %w", err)
	}
	var rep toyReply
	err = json.Unmarshal(out, &rep)
	return rep, err
}

func (s toyStore) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	req := toyRequest{Op: "append", ID: id}
	for _, m := range msgs {
		raw, err := storekit.EncodeMessage(m)
		if err != nil {
			return err
		}
		req.Msgs = append(req.Msgs, raw)
	}
	rep, err := s.call(ctx, req)
	if err == nil && rep.Err != "" {
		err = errors.New(rep.Err)
	}
	return err
}

func (s toyStore) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	rep, err := s.call(ctx, toyRequest{Op: "put", ID: id, Name: name, Value: value, Expect: expect})
	switch {
	case err != nil:
		return 0, err
	case rep.Conflict:
		return 0, fmt.Errorf("%w: %s", store.ErrConflict, rep.Err)
	case rep.Err != "":
		return 0, errors.New(rep.Err)
	}
	return rep.Version, nil
}

func runToyFaults(t *testing.T, blindRetry bool) {
	addr, mem := startToyServer(t)
	storetest.RunFaults(t, addr, func(_ testing.TB, _, proxy string) (store.Store, error) {
		return toyStore{InMemory: mem, addr: proxy, blindRetry: blindRetry}, nil
	})
}

// A store that never resends a write passes the fault cases: a lost reply
// is an error, and the write is stored once.
func TestRunFaultsPassesAStoreThatDoesNotRetry(t *testing.T) {
	if os.Getenv(toyEnv) != "" {
		t.Skip("child process")
	}
	runToyFaults(t, false)
}

const toyEnv = "STORETEST_TOY_BLIND_RETRY"

// TestToyBlindRetryChild runs the fault cases against the blindly
// retrying store; it does nothing unless TestRunFaultsCatchesBlindRetries
// started it.
func TestToyBlindRetryChild(t *testing.T) {
	if os.Getenv(toyEnv) == "" {
		t.Skip("only run as a child of TestRunFaultsCatchesBlindRetries")
	}
	runToyFaults(t, true)
}

func TestRunFaultsCatchesBlindRetries(t *testing.T) {
	if os.Getenv(toyEnv) != "" {
		t.Skip("child process")
	}
	for _, c := range []struct{ subtest, want string }{
		{"AppendExactlyOnceWhenAReplyIsLost", "found 4 of its messages"},
		{"PutStateExactlyOnceWhenAReplyIsLost", "reported its own successful write as a conflict"},
	} {
		t.Run(c.subtest, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestToyBlindRetryChild$/^"+c.subtest+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), toyEnv+"=1")
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the kit passed a store that retries writes blindly:\n%s", out)
			assert.Contains(t, string(out), c.want)
		})
	}
}
