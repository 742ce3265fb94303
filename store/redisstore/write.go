package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/memstack/memstack/store"
	"github.com/redis/go-redis/v9"
)

// tokenWindow is how long a write's token is kept after the write: a
// retry of the write's script that reaches the server within it changes
// nothing. Every write call is bounded by maxWriteCall, well within the
// window, so that no retry can start later.
const (
	tokenWindow  = 2 * time.Minute
	maxWriteCall = time.Minute
)

// newToken returns a fresh write token: 96 random bits, 16 characters of
// URL-safe base64.
func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// appendKeyToken returns the write token of an Append under append key
// key in namespace ns: the same for every Append of the identity under
// that key in that namespace, so the first one's run is recorded under it
// and every later one — another client's, a retry's, a race's loser —
// stores nothing (see "Exactly once" in the package documentation). The
// ops hash is the identity's, shared by its namespaces, so the token names
// the namespace; it cannot collide with another namespace's (namespaces
// have no ':') nor with a random token (base64url, no ':').
func appendKeyToken(ns, key string) string { return "k:" + ns + ":" + key }

// runWrite runs the script of one write with a fresh token as its first
// ARGV, under a context bounded by maxWriteCall: go-redis may send the
// script again (a lost reply, a dropped connection), and the token makes
// every run after the first a no-op that returns the first run's reply.
func (s *Store) runWrite(ctx context.Context, script *redis.Script, ks []string, args ...any) ([]any, error) {
	return s.runWriteAs(ctx, newToken(), script, ks, args...)
}

// runWriteAs is runWrite with the given token. Its error wraps
// store.ErrOutcomeUnknown when the script may have run (see writeOutcome).
func (s *Store) runWriteAs(ctx context.Context, token string, script *redis.Script, ks []string, args ...any) ([]any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nothing was sent
	}
	wctx := ctx
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > maxWriteCall {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, maxWriteCall)
		defer cancel()
	}
	res, err := script.Run(wctx, s.client, ks, append([]any{token}, args...)...).Slice()
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		err = fmt.Errorf("%w: a write is given at most %v (%w)", wctx.Err(), maxWriteCall, err)
	}
	return res, writeOutcome(err)
}

// writeOutcome returns the error of a write script's run, wrapping
// store.ErrOutcomeUnknown unless the error proves that no run of the
// script changed anything. Only an error reply raised inside the script
// does (Redis names the script in it, "@user_script"): that run found no
// write token of an earlier one — a script that finds one returns its
// reply — and Redis runs one script at a time, so no earlier attempt of
// the call ran either. Every other error may follow a run whose reply was
// lost: a deadline or a cancellation while the script was on its way or
// running, a broken connection, and also errors of a later attempt, since
// go-redis sends the script again on a new connection when one breaks
// (MaxRetries), and that attempt may fail to connect, time out, or get an
// error reply that is not the script's (BUSY, READONLY after a failover,
// LOADING, CLUSTERDOWN). The caller checks ctx before the script is sent,
// so a context already done never gets here.
func writeOutcome(err error) error {
	if err == nil {
		return nil
	}
	var reply redis.Error
	if errors.As(err, &reply) && strings.Contains(reply.Error(), "@user_script") {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
}

// status returns the first element of a script's table reply.
func status(res []any) string {
	if len(res) == 0 {
		return ""
	}
	st, _ := res[0].(string)
	return st
}
