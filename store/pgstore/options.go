package pgstore

import (
	"fmt"
	"regexp"

	"github.com/memstack/memstack/store"
)

// DefaultTablePrefix is the table prefix used unless WithTablePrefix sets
// another.
const DefaultTablePrefix = "memstack_"

// DefaultNamespace is the namespace used unless WithNamespace sets another.
const DefaultNamespace = "default"

// Option configures a Store. Options are checked by New and Open, which
// return an error naming the option and the bad value.
type Option func(*config) error

type config struct {
	prefix     string
	ns         string
	withoutDDL bool
	recall     bool // WithRecallIndex
}

func defaultConfig() config {
	return config{prefix: DefaultTablePrefix, ns: DefaultNamespace}
}

// applyOptions returns the configuration opts give, or the first option's
// error. Nil options are ignored.
func applyOptions(opts []Option) (config, error) {
	c := defaultConfig()
	for i, o := range opts {
		if o == nil {
			return config{}, fmt.Errorf("%w: pgstore: option %d of %d is nil", store.ErrInvalidArgument, i+1, len(opts))
		}
		if err := o(&c); err != nil {
			return config{}, fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
		}
	}
	return c, nil
}

var prefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,30}$`)

// WithTablePrefix sets the prefix of the tables and the sequence the store
// uses (default "memstack_": tables memstack_messages and memstack_state,
// sequence memstack_seq). The prefix must match [a-z_][a-z0-9_]{0,30}, so
// it is a valid unquoted identifier and every name built from it fits
// PostgreSQL's 63-byte limit. Stores with different prefixes share nothing;
// Forget reaches every namespace under its own prefix only.
func WithTablePrefix(prefix string) Option {
	return func(c *config) error {
		if !prefixRE.MatchString(prefix) {
			return fmt.Errorf("pgstore: WithTablePrefix(%q): the prefix must match [a-z_][a-z0-9_]{0,30}", prefix)
		}
		c.prefix = prefix
		return nil
	}
}

// WithNamespace sets the namespace the store reads and writes (default
// "default"): a column, so several memory layers can share one set of
// tables and keep their messages and state apart. Clear clears one
// namespace; Forget clears every namespace under the table prefix. The
// namespace is 1 to 200 bytes of printable ASCII.
func WithNamespace(ns string) Option {
	return func(c *config) error {
		if ns == "" || len(ns) > 200 {
			return fmt.Errorf("pgstore: WithNamespace(%q): the namespace must be 1 to 200 bytes long", ns)
		}
		for i := 0; i < len(ns); i++ {
			if ns[i] < 0x20 || ns[i] > 0x7e {
				return fmt.Errorf("pgstore: WithNamespace(%q): byte %d is not printable ASCII", ns, i)
			}
		}
		c.ns = ns
		return nil
	}
}

// WithoutDDL makes New and Open never create or migrate the schema: the
// tables must already be at SchemaVersion, or New and Open fail with an
// error wrapping ErrSchemaVersion that says which version they found
// (none, or an older one). Without it, tables already at SchemaVersion are
// used as they are too — no DDL runs, so a role with only DML grants
// opens them either way — but absent or older tables are created or
// migrated, which needs a role that may (see the package documentation,
// Roles). Use it where the schema is deployed by a migration step of its
// own and an application must never change it, or take the locks DDL
// takes, as a side effect of starting.
func WithoutDDL() Option {
	return func(c *config) error {
		c.withoutDDL = true
		return nil
	}
}
