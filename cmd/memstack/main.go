// Command memstack answers a user's data requests against a memstack
// store: it lists a user's (or a tenant's) conversations, exports
// everything held for them as JSON — every namespace (memory layer) of the
// backend, messages and state — and forgets them, leaving nothing behind.
// It also imports a user's past conversations into a store (see Import
// below).
//
// Usage:
//
//	memstack list   -store DSN (-tenant T | -empty-tenant) (-user U | -empty-user | -all-users)
//	memstack export -store DSN (-tenant T | -empty-tenant) (-user U | -empty-user | -all-users) [-o FILE]   (FILE must not exist)
//	memstack forget -store DSN (-tenant T | -empty-tenant) (-user U | -empty-user | -all-users) -yes
//	memstack import -store DSN (-tenant T | -empty-tenant) (-user U | -empty-user) [-namespace NS] FILE   (FILE "-": standard input)
//
// DSN names the backend:
//
//	sqlite:///path/to/memory.db   (or a path ending in .db, .sqlite or .sqlite3)
//	redis://host:6379/0           (or rediss://; -prefix sets the key prefix, default "memstack";
//	                              -allow-eviction accepts a server that may evict keys)
//	postgres://user:pass@host/db  (or postgresql://; -prefix sets the table prefix, default "memstack_")
//
// The tenant and the user are always named. -tenant and -user take a
// non-empty name; the empty tenant (an application that does not use
// tenants keeps every user there) is named with -empty-tenant, the empty
// user with -empty-user, and -all-users means every user of the tenant.
// An empty -tenant or -user (an unset shell variable) is refused, as is
// a command without -tenant or -empty-tenant: bad usage, exit status 2,
// and nothing is read or forgotten.
//
// The command reaches every namespace of the backend, as store.Forget
// does, whatever namespace the memories were given. It never creates or
// migrates a store, and list and export write nothing:
//
//   - SQLite: the file must exist and hold memstack's tables at the
//     schema version of this build. list and export open it read-only
//     (sqlitestore.WithReadOnly): the database file is left byte for byte
//     as it was (SQLite, as for every reader of a file in WAL mode,
//     creates an empty -wal and a -shm file next to it when they are
//     missing, and leaves them). forget opens the file without creating
//     it, after the same check. A file without memstack tables ("no
//     memstack tables in the file"), or of an older schema version, which
//     the application's own build migrates when it opens it, is an error
//     (exit status 1) and is left unchanged.
//   - PostgreSQL: the tables are opened without DDL (pgstore.WithoutDDL)
//     and must be at this build's schema version; list and export run in
//     read-only sessions (default_transaction_read_only).
//   - Redis: opening only pings the server and reads its
//     maxmemory-policy; list and export only SCAN and read.
//
// When the scope holds nothing, list prints nothing, export writes an
// export without identities, and both say so on standard error ("no
// conversations of … in …") and exit 0; forget prints "forgot 0
// conversations". forget asks for -yes, prints how many conversations it
// removed, and exits 0. Exit status: 0 on success, 1 on a failure, 2 on
// bad usage.
//
// # Import
//
// import replays the conversations in FILE — JSON Lines of
// {"conversation", "role", "content", "time"}, or what export writes —
// through the stack memstack's README recommends, on one store: RecentN(6),
// Summary with the extractive summarizer (no model), Facts with the
// built-in pattern extractor kept per user (WithFactsPerUser), and
// Recall, each with memories.WithStore, in namespace NS of the backend
// (default: the backend's default namespace, where memories opened without
// WithNamespace keep their data). Each message is stored at its original
// time, and the stack derives what it would have derived had the
// conversations happened with memstack in place: each conversation's
// transcript, its running summary, the user's facts, and the recall
// index of the user's conversations. It prints "imported N conversations,
// M exchanges, K messages (P already stored, S skipped)" and exits 0. See package replay
// for the formats and how messages are saved; an export gives, for each
// conversation, the messages of its namespace holding the most.
//
// Importing the same FILE again stores nothing new (the saves carry
// deterministic keys; in Redis only within two minutes of the first
// import, as long as Redis remembers a key). An application with another
// layout — other namespaces per layer, an LLM summarizer or extractor,
// other options — calls replay.Import with its own stack instead: what a
// layer derives depends on its configuration.
//
// import writes, as forget does, and like forget never creates or
// migrates a store: a SQLite file must exist and hold memstack's tables
// at this build's schema version, PostgreSQL tables are opened without
// DDL. A failure stops the import: the conversations before the failing
// one stay stored, and running the command again (after fixing the
// cause) stores the rest without storing anything twice.
package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/memstack/memstack"
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
  memstack list   -store DSN (-tenant T | -empty-tenant) (-user U | -empty-user | -all-users)
  memstack export -store DSN (-tenant T | -empty-tenant) (-user U | -empty-user | -all-users) [-o FILE]
  memstack forget -store DSN (-tenant T | -empty-tenant) (-user U | -empty-user | -all-users) -yes
  memstack import -store DSN (-tenant T | -empty-tenant) (-user U | -empty-user) [-namespace NS] FILE

-tenant and -user take a non-empty name; -empty-tenant and -empty-user name the empty one.
DSN: sqlite:///path.db (or a .db/.sqlite/.sqlite3 path), redis://host:port/db, postgres://...
FILE: JSON Lines of {conversation, role, content, time}, or an export; "-" reads standard input.
The command never creates or migrates a store; list and export write nothing.`

// run is the command: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := runErr(ctx, args, stdout, stderr)
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
	dsn, prefix, tenant, user, out   string
	namespace                        string // import
	emptyTenant, emptyUser, allUsers bool
	yes, allowEviction               bool
	readOnly                         bool // list and export
	forImport                        bool // import: open o.namespace
}

func runErr(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	cmd := args[0]
	if cmd != "list" && cmd != "export" && cmd != "forget" && cmd != "import" {
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	var o options
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.dsn, "store", "", "the store's DSN")
	fs.StringVar(&o.prefix, "prefix", "", "the Redis key prefix or PostgreSQL table prefix (default: the backend's)")
	fs.StringVar(&o.tenant, "tenant", "", "the tenant (not empty: see -empty-tenant)")
	fs.BoolVar(&o.emptyTenant, "empty-tenant", false, "the empty tenant \"\" (where an application without tenants keeps every user)")
	fs.StringVar(&o.user, "user", "", "the user (not empty: see -empty-user)")
	fs.BoolVar(&o.emptyUser, "empty-user", false, "the empty user \"\"")
	fs.BoolVar(&o.allUsers, "all-users", false, "every user of the tenant")
	fs.StringVar(&o.out, "o", "", "export: a new file to write (refused if it exists; default: standard output)")
	fs.BoolVar(&o.yes, "yes", false, "forget: confirm")
	fs.StringVar(&o.namespace, "namespace", "", "import: the namespace to import into (default: the backend's)")
	fs.BoolVar(&o.allowEviction, "allow-eviction", false, "Redis: accept a server whose maxmemory-policy may evict keys (redisstore.WithEvictionAllowed)")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %s: %v", errUsage, cmd, err)
	}
	var file string
	switch {
	case cmd == "import" && fs.NArg() == 0:
		return fmt.Errorf("%w: import: name the FILE to import (- for standard input)", errUsage)
	case cmd == "import" && fs.NArg() > 1:
		return fmt.Errorf("%w: import: unexpected argument %q after FILE", errUsage, fs.Arg(1))
	case cmd == "import":
		file = fs.Arg(0)
	case fs.NArg() > 0:
		return fmt.Errorf("%w: %s: unexpected argument %q", errUsage, cmd, fs.Arg(0))
	}
	if o.dsn == "" {
		return fmt.Errorf("%w: %s: -store is required", errUsage, cmd)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// The tenant and the user are always named: an empty or missing one
	// (an unset shell variable) must not mean the empty tenant, where an
	// application without tenants keeps every user.
	switch {
	case set["tenant"] && o.tenant == "":
		return fmt.Errorf("%w: %s: -tenant is empty: name the empty tenant with -empty-tenant", errUsage, cmd)
	case set["tenant"] && o.emptyTenant:
		return fmt.Errorf("%w: %s: give one of -tenant and -empty-tenant, not both", errUsage, cmd)
	case !set["tenant"] && !o.emptyTenant:
		return fmt.Errorf("%w: %s: -tenant is required (-empty-tenant for the empty tenant)", errUsage, cmd)
	case set["user"] && o.user == "":
		return fmt.Errorf("%w: %s: -user is empty: name the empty user with -empty-user", errUsage, cmd)
	}
	if n := btoi(set["user"]) + btoi(o.emptyUser) + btoi(o.allUsers); n != 1 {
		return fmt.Errorf("%w: %s: give exactly one of -user, -empty-user and -all-users", errUsage, cmd)
	}
	if cmd == "import" && o.allUsers {
		return fmt.Errorf("%w: import: -all-users does not apply: import one user's conversations (-user or -empty-user)", errUsage)
	}
	if cmd != "import" && set["namespace"] {
		return fmt.Errorf("%w: %s: -namespace is for import", errUsage, cmd)
	}
	if cmd == "import" && set["namespace"] && o.namespace == "" {
		return fmt.Errorf("%w: import: -namespace is empty", errUsage)
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
	o.readOnly = cmd != "forget" && cmd != "import"
	o.forImport = cmd == "import"
	if cmd == "import" {
		// Read the file before opening the store: bad input changes nothing.
		convs, err := readConversations(file)
		if err != nil {
			return err
		}
		s, where, closeStore, err := openStore(ctx, o)
		if err != nil {
			return err
		}
		defer closeStore()
		return runImport(ctx, s, where, memstack.Identity{Tenant: o.tenant, User: o.user}, convs, stdout)
	}
	s, where, closeStore, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer closeStore()
	u, ok := s.(store.Users)
	if !ok {
		return fmt.Errorf("the store behind %s (%T) cannot list or forget users", redact(o.dsn), s)
	}
	nothing := func() { fmt.Fprintf(stderr, "memstack: no conversations of %s in %s\n", scope, where) }
	switch cmd {
	case "list":
		ids, err := u.Identities(ctx, scope)
		if err != nil {
			return fmt.Errorf("listing %s: %w", scope, err)
		}
		for _, id := range ids {
			fmt.Fprintf(stdout, "%s\t%q\t%q\t%q\n", id.Key(), id.Tenant, id.User, id.Conversation)
		}
		if len(ids) == 0 {
			nothing()
		}
		return nil
	case "export":
		ex, err := u.Export(ctx, scope)
		if err != nil {
			return fmt.Errorf("exporting %s: %w", scope, err)
		}
		if len(ex.Identities) == 0 {
			nothing()
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

// openStore opens the backend o.dsn names — read-only for list and
// export (o.readOnly) — and returns it, a description of where it is for
// messages, and its closer. It never creates or migrates a store. Users
// calls reach every namespace, so the namespace given here does not
// matter.
func openStore(ctx context.Context, o options) (s store.Store, where string, closeStore func(), err error) {
	dsn, prefix := o.dsn, o.prefix
	lower := strings.ToLower(dsn)
	switch {
	case strings.HasPrefix(lower, "redis://"), strings.HasPrefix(lower, "rediss://"):
		// Open pings the server and reads its maxmemory-policy: no writes.
		var opts []redisstore.Option
		if prefix == "" {
			prefix = redisstore.DefaultKeyPrefix
		}
		opts = append(opts, redisstore.WithKeyPrefix(prefix))
		if o.allowEviction {
			opts = append(opts, redisstore.WithEvictionAllowed())
		}
		if o.namespace != "" {
			opts = append(opts, redisstore.WithNamespace(o.namespace))
		}
		s, err := redisstore.Open(ctx, dsn, opts...)
		if err != nil {
			return nil, "", nil, fmt.Errorf("opening %s: %w", redact(dsn), err)
		}
		return s, fmt.Sprintf("%s under key prefix %q", redact(dsn), prefix), func() { _ = s.Close() }, nil
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		// Never create or migrate tables: a mistyped DSN or prefix must
		// not leave an empty schema behind.
		if prefix == "" {
			prefix = pgstore.DefaultTablePrefix
		}
		opts := []pgstore.Option{pgstore.WithoutDDL(), pgstore.WithTablePrefix(prefix)}
		if o.namespace != "" {
			opts = append(opts, pgstore.WithNamespace(o.namespace))
		}
		where := fmt.Sprintf("%s (table prefix %q)", redact(dsn), prefix)
		if o.readOnly {
			// The server refuses every write of these sessions.
			dsn = withQueryParam(dsn, "default_transaction_read_only", "on")
		}
		s, err := pgstore.Open(ctx, dsn, opts...)
		if errors.Is(err, pgstore.ErrSchemaVersion) {
			return nil, "", nil, fmt.Errorf("no memstack tables at schema version %d in %s (the command never creates or migrates them; check -prefix and the DSN's database): %w",
				pgstore.SchemaVersion, where, err)
		}
		if err != nil {
			return nil, "", nil, fmt.Errorf("opening %s: %w", redact(o.dsn), err)
		}
		return s, where, func() { _ = s.Close() }, nil
	}
	path, ok := strings.CutPrefix(dsn, "sqlite://")
	if !ok && !hasSQLiteExt(lower) {
		return nil, "", nil, fmt.Errorf("%w: -store %q: want sqlite:///path, a .db path, redis://… or postgres://…", errUsage, redact(dsn))
	}
	if prefix != "" {
		return nil, "", nil, fmt.Errorf("%w: -prefix does not apply to SQLite", errUsage)
	}
	ns := ""
	if o.forImport {
		ns = cmp.Or(o.namespace, sqlitestore.DefaultNamespace)
	}
	s, closeStore, err = openSQLite(ctx, path, o.readOnly, ns)
	if err != nil {
		return nil, "", nil, err
	}
	return s, path, closeStore, nil
}

// openSQLite opens the memstack file at path: read-only when readOnly
// (sqlitestore.WithReadOnly, which writes nothing and refuses a file
// without memstack's tables at this build's schema version); else, for
// forget and import, after the same check, read-write without creating
// the file (mode=rw), under namespace ns (import) or, with ns "", a
// namespace the file already has, so that opening for forget writes
// nothing either.
func openSQLite(ctx context.Context, path string, readOnly bool, ns string) (store.Store, func(), error) {
	if _, err := os.Stat(path); err != nil {
		return nil, nil, fmt.Errorf("the SQLite file %s: %w", path, err)
	}
	ro, err := sqlitestore.Open(ctx, path, sqlitestore.WithReadOnly())
	if err != nil {
		return nil, nil, err // it names the file and says what is wrong with it
	}
	if readOnly {
		return ro, func() { _ = ro.Close() }, nil
	}
	if err := ro.Close(); err != nil {
		return nil, nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("the SQLite file %s: %w", path, err)
	}
	// mode=rw: SQLite opens the file for writing but never creates it.
	uriPath := filepath.ToSlash(abs)
	if !strings.HasPrefix(uriPath, "/") {
		uriPath = "/" + uriPath // file:/C:/… on Windows
	}
	u := url.URL{Scheme: "file", Opaque: (&url.URL{Path: uriPath}).EscapedPath(), RawQuery: "mode=rw&_pragma=busy_timeout(5000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	// Open under a namespace the file has: registering a new one would be
	// a write that forget was not asked for.
	if ns == "" {
		err = db.QueryRowContext(ctx, `SELECT ns FROM memstack_namespaces WHERE ns <> '' ORDER BY ns LIMIT 1`).Scan(&ns)
		if errors.Is(err, sql.ErrNoRows) {
			ns, err = sqlitestore.DefaultNamespace, nil
		}
	}
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("opening %s: reading its namespaces: %w", path, err)
	}
	s, err := sqlitestore.New(db, sqlitestore.WithNamespace(ns))
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return s, func() { _ = s.Close(); _ = db.Close() }, nil
}

// withQueryParam adds key=value to the query of the URL dsn.
func withQueryParam(dsn, key, value string) string {
	base, frag, hasFrag := strings.Cut(dsn, "#")
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	base += sep + url.QueryEscape(key) + "=" + url.QueryEscape(value)
	if hasFrag {
		base += "#" + frag
	}
	return base
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

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
