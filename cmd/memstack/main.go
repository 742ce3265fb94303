// Command memstack answers a user's data requests against a memstack
// store: it lists a user's (or a tenant's) conversations, exports
// everything held for them as JSON — every namespace (memory layer) of the
// backend, messages and state — and forgets them, leaving nothing behind.
//
// Usage:
//
//	memstack list   -store DSN -tenant T (-user U | -all-users)
//	memstack export -store DSN -tenant T (-user U | -all-users) [-o FILE]   (FILE must not exist)
//	memstack forget -store DSN -tenant T (-user U | -all-users) -yes
//
// DSN names the backend:
//
//	sqlite:///path/to/memory.db   (or a path ending in .db, .sqlite or .sqlite3)
//	redis://host:6379/0           (or rediss://; -prefix sets the key prefix, default "memstack";
//	                              -allow-eviction accepts a server that may evict keys)
//	postgres://user:pass@host/db  (or postgresql://; -prefix sets the table prefix, default "memstack_")
//
// The command reaches every namespace of the backend, as store.Forget
// does, whatever namespace the memories were given. It never creates a
// store: a missing SQLite file is an error, and PostgreSQL tables are
// opened without DDL (pgstore.WithoutDDL). forget asks for -yes,
// prints how many conversations it removed, and exits 0. Exit
// status: 0 on success, 1 on a failure, 2 on bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/sqlitestore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks errors in the command line (exit status 2).
var errUsage = errors.New("usage")

const usage = `usage:
  memstack list   -store DSN -tenant T (-user U | -all-users)
  memstack export -store DSN -tenant T (-user U | -all-users) [-o FILE]
  memstack forget -store DSN -tenant T (-user U | -all-users) -yes

DSN: sqlite:///path.db (or a .db/.sqlite/.sqlite3 path), redis://host:port/db, postgres://...`

// run is the command: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := runErr(ctx, args, stdout)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "memstack: %v\n%s\n", err, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "memstack: %v\n", err)
		return 1
	}
}

type options struct {
	dsn, prefix, tenant, user, out string
	allUsers, yes, allowEviction   bool
}

func runErr(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	cmd := args[0]
	if cmd != "list" && cmd != "export" && cmd != "forget" {
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	var o options
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.dsn, "store", "", "the store's DSN")
	fs.StringVar(&o.prefix, "prefix", "", "the Redis key prefix or PostgreSQL table prefix (default: the backend's)")
	fs.StringVar(&o.tenant, "tenant", "", "the tenant")
	fs.StringVar(&o.user, "user", "", "the user")
	fs.BoolVar(&o.allUsers, "all-users", false, "every user of the tenant")
	fs.StringVar(&o.out, "o", "", "export: a new file to write (refused if it exists; default: standard output)")
	fs.BoolVar(&o.yes, "yes", false, "forget: confirm")
	fs.BoolVar(&o.allowEviction, "allow-eviction", false, "Redis: accept a server whose maxmemory-policy may evict keys (redisstore.WithEvictionAllowed)")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %s: %v", errUsage, cmd, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s: unexpected argument %q", errUsage, cmd, fs.Arg(0))
	}
	if o.dsn == "" {
		return fmt.Errorf("%w: %s: -store is required", errUsage, cmd)
	}
	userSet := false
	fs.Visit(func(f *flag.Flag) { userSet = userSet || f.Name == "user" })
	if userSet == o.allUsers {
		return fmt.Errorf("%w: %s: give exactly one of -user and -all-users", errUsage, cmd)
	}
	if cmd != "export" && o.out != "" {
		return fmt.Errorf("%w: %s: -o is for export", errUsage, cmd)
	}
	if cmd == "forget" && !o.yes {
		return fmt.Errorf("%w: forget removes data for good: add -yes", errUsage)
	}
	scope := store.UserScope(o.tenant, o.user)
	if o.allUsers {
		scope = store.TenantScope(o.tenant)
	}
	s, closeStore, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer closeStore()
	u, ok := s.(store.Users)
	if !ok {
		return fmt.Errorf("the store behind %s (%T) cannot list or forget users", redact(o.dsn), s)
	}
	switch cmd {
	case "list":
		ids, err := u.Identities(ctx, scope)
		if err != nil {
			return fmt.Errorf("listing %s: %w", scope, err)
		}
		for _, id := range ids {
			fmt.Fprintf(stdout, "%s\t%q\t%q\t%q\n", id.Key(), id.Tenant, id.User, id.Conversation)
		}
		return nil
	case "export":
		ex, err := u.Export(ctx, scope)
		if err != nil {
			return fmt.Errorf("exporting %s: %w", scope, err)
		}
		w := stdout
		if o.out != "" {
			f, err := os.OpenFile(o.out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			if err := ex.WriteJSON(f); err != nil {
				_ = f.Close()
				_ = os.Remove(o.out) // no partial export of a user's data is left behind
				return err
			}
			if err := f.Close(); err != nil {
				_ = os.Remove(o.out)
				return fmt.Errorf("export: %w", err)
			}
			return nil
		}
		return ex.WriteJSON(w)
	default: // forget
		n, err := u.ForgetScope(ctx, scope)
		if err != nil {
			return fmt.Errorf("forgetting %s (%d conversations removed before the failure; run it again to finish): %w", scope, n, err)
		}
		fmt.Fprintf(stdout, "forgot %d conversations of %s\n", n, scope)
		return nil
	}
}

// openStore opens the backend dsn names. Users calls reach every
// namespace, so the namespace given here does not matter.
func openStore(ctx context.Context, o options) (store.Store, func(), error) {
	dsn, prefix := o.dsn, o.prefix
	lower := strings.ToLower(dsn)
	switch {
	case strings.HasPrefix(lower, "redis://"), strings.HasPrefix(lower, "rediss://"):
		var opts []redisstore.Option
		if prefix != "" {
			opts = append(opts, redisstore.WithKeyPrefix(prefix))
		}
		if o.allowEviction {
			opts = append(opts, redisstore.WithEvictionAllowed())
		}
		s, err := redisstore.Open(ctx, dsn, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("opening %s: %w", redact(dsn), err)
		}
		return s, func() { _ = s.Close() }, nil
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		// Never create or migrate tables: a mistyped DSN or prefix must
		// not leave an empty schema behind.
		opts := []pgstore.Option{pgstore.WithoutDDL()}
		if prefix != "" {
			opts = append(opts, pgstore.WithTablePrefix(prefix))
		}
		s, err := pgstore.Open(ctx, dsn, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("opening %s: %w", redact(dsn), err)
		}
		return s, func() { _ = s.Close() }, nil
	}
	path, ok := strings.CutPrefix(dsn, "sqlite://")
	if !ok && !hasSQLiteExt(lower) {
		return nil, nil, fmt.Errorf("%w: -store %q: want sqlite:///path, a .db path, redis://… or postgres://…", errUsage, redact(dsn))
	}
	if prefix != "" {
		return nil, nil, fmt.Errorf("%w: -prefix does not apply to SQLite", errUsage)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, nil, fmt.Errorf("the SQLite file %s: %w", path, err)
	}
	s, err := sqlitestore.Open(ctx, path)
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return s, func() { _ = s.Close() }, nil
}

func hasSQLiteExt(p string) bool {
	for _, ext := range []string{".db", ".sqlite", ".sqlite3"} {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}

// redact hides a DSN's password.
func redact(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return dsn
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return dsn
	}
	cred := rest[:at]
	if user, _, hasPass := strings.Cut(cred, ":"); hasPass {
		return scheme + "://" + user + ":xxxxx@" + rest[at+1:]
	}
	return dsn
}
