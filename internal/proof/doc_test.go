// Package proof_test is memstack's proof under load, faults and bad input
// (issue 6): suites that anyone can rerun and that go through the public
// API only — the memories, combined.Memory and the store backends — with
// real SQLite files and real Redis and PostgreSQL servers (started on
// 127.0.0.1 by internal/testsvc; a missing server skips those subtests, or
// fails them when CI is set). The only fake is an llms.Model test double
// standing in for a model's answers.
//
// # Stress (stress_test.go)
//
// TestStress drives many identities concurrently, each saving its own turns,
// through one combined.Memory of Buffer + RecentN(10) + Summary (extractive
// summarizer, background mode), on every backend — in-memory, SQLite, Redis,
// PostgreSQL — each memory's store on that backend in its own namespace.
// Afterwards every identity's transcript in the Buffer's store equals
// exactly what it sent (0 lost, 0 duplicated, 0 from another identity),
// RecentN shows exactly its last 10 messages, and Summary's folded count
// plus its raw messages equals what was sent (the raw messages being
// exactly the newest ones). Half the identities have separators and
// wildcards in their parts.
//
// The normal run is the short version: 32 identities × 20 turns per
// backend. The long version is 1,000 identities × 100 turns per backend:
//
//	go test -race -timeout 60m ./internal/proof -run TestStress -stress.long -v
//	MEMSTACK_STRESS_LONG=1 go test -race -timeout 60m ./internal/proof -run TestStress -v
//
// and one backend alone with -run TestStress/sqlite (inmemory, sqlite,
// redis, postgres). -stress.ids and -stress.turns set other sizes.
//
// # Faults (faults_model_test.go, faults_server_test.go)
//
// TestModelFaults drives Summary (summarizer.New over a model double that
// fails 30% of its calls and blocks until its context is done on 10%) in
// synchronous and background mode: no accepted turn is lost, every load
// succeeds, and the failures are reported to the hook and in Stats.
//
// TestServerFaults kills and restarts a private Redis and a private
// PostgreSQL server under concurrent writers going through
// combined.Memory(Buffer, RecentN): calls during the outage return errors
// within their deadline (plus slack) and never panic, every acknowledged
// turn is there afterwards, and the same memory values work again.
//
// # Bad input (badinput_test.go)
//
// TestBadInput is one table of cases across the public constructors and
// methods: each returns an error naming the problem, writes nothing (checked
// by reading the store) and never panics.
//
// Fuzzing lives next to the code it fuzzes (adapter, store, the store
// backends and the root package); see CONTRIBUTING.md.
package proof_test
