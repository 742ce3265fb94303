package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// Clear implements store.Store with one script: it deletes the identity's
// messages and state in this namespace and sets the namespace's Clear mark
// to a fresh number from the identity's counter, which becomes the absent
// version of every state name there. Under WithTTL the mark expires with
// the conversation, so the same script raises the slot's forgotten version
// to the mark: afterwards the absent version never falls below it, and a
// commit that read before the Clear conflicts however late it comes. Seqs
// go on from the shared counter. A retry of the script after a lost reply
// changes nothing (its write token), so it never deletes what others wrote
// since.
func (s *Store) Clear(ctx context.Context, id memstack.Identity) error {
	const op = "Clear"
	if err := s.begin(ctx, op, id); err != nil {
		return err
	}
	res, err := s.runWrite(ctx, clearScript, s.keysOf(id).all(), s.ns, s.ttlArg)
	if err != nil {
		return s.fail(ctx, op, id, err)
	}
	if st := status(res); st != "ok" {
		return s.corruptStatus(op, id, st)
	}
	return nil
}

// runForget runs forgetScript for id with keys ks and the namespaces
// names, and, when the store cleans change feeds, the feed of id's user.
func (s *Store) runForget(ctx context.Context, id memstack.Identity, ks []string, names []string) ([]any, error) {
	feeds := "0"
	if s.cleansFeeds() {
		set, _ := s.feedKeys(id.Tenant, id.User)
		ks = append(ks, set)
		feeds = "1"
	}
	args := make([]any, 0, 2+len(names))
	args = append(args, feeds, id.Key())
	for _, ns := range names {
		args = append(args, ns)
	}
	return forgetScript.Run(ctx, s.client, ks, args...).Slice()
}

// dropFeeds deletes the change feeds of the users within scope
// (ForgetScope's last step: a feed names conversations) and, for a
// tenant's scope, the tenant's counter of marks — after the server's
// clock has passed it (see dropCounterScript), so the marks of later
// appends stay above every mark a reader holds.
func (s *Store) dropFeeds(ctx context.Context, scope store.Scope) error {
	if !s.cleansFeeds() {
		return nil
	}
	if !scope.AllUsers {
		set, _ := s.feedKeys(scope.Tenant, scope.User)
		if err := s.client.Unlink(ctx, set).Err(); err != nil {
			return fmt.Errorf("deleting the change feed: %w", err)
		}
		return nil
	}
	pattern := globEscape(s.prefix) + ":feed{" + globEscape(scope.KeyPrefix()) + "*"
	var cursor uint64
	for {
		keys, next, err := s.client.Scan(ctx, cursor, pattern, scanBatch).Result()
		if err != nil {
			return fmt.Errorf("SCAN MATCH %q: %w", pattern, err)
		}
		if len(keys) > 0 {
			if err := s.client.Unlink(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("deleting change feeds: %w", err)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	_, counter := s.feedKeys(scope.Tenant, "")
	for attempt := 1; ; attempt++ {
		res, err := dropCounterScript.Run(ctx, s.client, []string{counter}).Slice()
		if err != nil {
			return fmt.Errorf("deleting the tenant's counter of marks: %w", err)
		}
		if status(res) == "ok" {
			return nil
		}
		if err := waitAsked(ctx, res); err != nil {
			return err
		}
		if attempt >= maxForgetAttempts {
			return fmt.Errorf("deleting the tenant's counter of marks: gave up after %d attempts", attempt)
		}
	}
}

// waitAsked sleeps for what a script's {'wait', microseconds} reply asks
// (at least 1 µs, at most 2 s: the clock passing a counter ahead of it),
// or until ctx ends, whose error it then returns.
func waitAsked(ctx context.Context, res []any) error {
	str, _ := res[len(res)-1].(string)
	us, _ := strconv.ParseInt(str, 10, 64)
	t := time.NewTimer(time.Duration(min(max(us, 1), 2_000_000)) * time.Microsecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// maxForgetAttempts bounds Forget's optimistic retries (a namespace
// appearing between reading the namespace set and deleting).
const maxForgetAttempts = 50

// Forget implements store.Store: in one script it moves the forgotten
// version of the identity's hash slot to a fresh number and deletes every
// key of the identity under this store's prefix — messages (and their
// index), state and Clear mark of every namespace, the Seq counter, the
// namespace set and the write tokens — and nothing else. A PutState that read the
// identity's state before Forget then conflicts (forgetScript explains why
// both must be one step). If the Seq counter is ahead of the server's clock (a
// burst of appends just now), Forget first waits until the clock passes
// it, so no Seq is ever handed out twice.
//
// The namespaces come from the identity's nss set; on a server that may
// evict keys (WithEvictionAllowed), which may have evicted that set,
// Forget also finds the identity's keys with SCAN (see the package
// documentation, "Production settings").
func (s *Store) Forget(ctx context.Context, id memstack.Identity) error {
	const op = "Forget"
	if err := s.begin(ctx, op, id); err != nil {
		return err
	}
	var f *held
	if s.evicting {
		found, err := s.scan(ctx, s.identityPattern(id), s.keysOf(id).seq)
		if err != nil {
			return s.fail(ctx, op, id, fmt.Errorf("finding the identity's keys: %w", err))
		}
		f = found[id.Key()]
	}
	return s.forget(ctx, op, id, f)
}

// forget runs the Forget script of id over the namespaces of its nss set,
// this store's and those of f (what a SCAN found of id, nil if none), and
// f's other keys.
func (s *Store) forget(ctx context.Context, op string, id memstack.Identity, f *held) error {
	k := s.keysOf(id)
	for attempt := 1; ; attempt++ {
		members, err := s.client.SMembers(ctx, k.nss).Result()
		if err != nil {
			return s.fail(ctx, op, id, err)
		}
		nss := map[string]bool{s.ns: true}
		for _, ns := range members {
			nss[ns] = true
		}
		var other []string
		if f != nil {
			for ns := range f.namespaces {
				nss[ns] = true
			}
			for ns := range f.indexed {
				nss[ns] = true
			}
			other = f.other
		}
		names := make([]string, 0, len(nss))
		for ns := range nss {
			names = append(names, ns)
		}
		sort.Strings(names)
		ks := make([]string, 0, 5+4*len(names)+len(other))
		ks = append(ks, k.seq, k.nss, k.forgotten, k.ops, k.opq)
		for _, ns := range names {
			m, st, c, sys := k.inNamespace(ns)
			ks = append(ks, m, st, c, sys)
		}
		ks = append(ks, other...)
		if err := ctx.Err(); err != nil {
			return s.fail(ctx, op, id, err) // nothing was sent
		}
		res, err := s.runForget(ctx, id, ks, names)
		if err != nil {
			return s.fail(ctx, op, id, writeOutcome(err))
		}
		switch status(res) {
		case "ok":
			return nil
		case "wait":
			if err := waitAsked(ctx, res); err != nil {
				return s.fail(ctx, op, id, err)
			}
		}
		if attempt >= maxForgetAttempts {
			return s.fail(ctx, op, id, fmt.Errorf("gave up after %d attempts: namespaces or Seqs kept changing", attempt))
		}
	}
}
