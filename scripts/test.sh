#!/usr/bin/env bash
# The memstack test command (README: "Run the tests"). It installs what the
# tests need if it is missing, then checks formatting, vets, builds every
# example and runs every test with the race detector.
#
# Usage: ./scripts/test.sh            (from anywhere inside the repository)
# Environment: CI=true makes missing prerequisites a failure, never a skip.
set -euo pipefail

cd "$(dirname "$0")/.."

say() { printf '==> %s\n' "$*"; }

# go and the caches need a home directory even where the caller has none.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"

if ! command -v go >/dev/null 2>&1; then
	if [ -x /usr/local/go/bin/go ]; then
		export PATH="/usr/local/go/bin:$PATH"
	else
		echo "go is not installed: install Go 1.26 or newer (https://go.dev/dl/)" >&2
		exit 1
	fi
fi
# The race detector needs cgo and a C compiler.
if ! command -v gcc >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		say "installing gcc (needed by go test -race)"
		apt-get update -qq && apt-get install -y -qq gcc >/dev/null
	else
		echo "gcc is missing: go test -race needs a C compiler" >&2
		exit 1
	fi
fi
export CGO_ENABLED=1

in_ci() { [ -n "${CI:-}" ] && [ "$CI" != false ] && [ "$CI" != 0 ]; }

# Real servers for the store and Ollama tests. The tests start their own
# throwaway instances on 127.0.0.1 (see internal/testsvc); this only makes
# sure the programs are installed.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if ! command -v redis-server >/dev/null 2>&1 || [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		say "installing redis-server and postgresql (Debian packages)"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server postgresql >/dev/null
		# Debian starts the packaged services; the tests use their own.
		for svc in redis-server postgresql; do
			service "$svc" stop >/dev/null 2>&1 || true
		done
	elif in_ci; then
		echo "CI is set and redis-server/postgresql are missing: install them (apt-get install -y redis-server postgresql)" >&2
		exit 1
	else
		say "redis-server or postgresql missing: their tests will be skipped (apt-get install -y redis-server postgresql)"
	fi
fi

say "ollama (Ollama integration tests; built once, cached outside the repository)"
if ollama_bin=$(./scripts/ollama.sh); then
	export MEMSTACK_OLLAMA_BIN="$ollama_bin"
elif in_ci; then
	echo "CI is set and ollama could not be built" >&2
	exit 1
else
	say "ollama could not be built: the Ollama tests will be skipped"
fi

# The repository is several modules (the core, each backend, the
# OpenTelemetry sink, the examples, the commands, the proof suites) tied
# together by the committed go.work; every step covers every module.
modules=$(go list -m -f '{{.Dir}}')
pkgs=()
for dir in $modules; do
	if [ "$dir" = "$PWD" ]; then pkgs+=(./...); else pkgs+=("./${dir#"$PWD"/}/..."); fi
done

say "go $(go env GOVERSION): downloading modules"
go mod download

say "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi

say "each module builds without go.work (its go.mod and go.sum are complete)"
for dir in $modules; do
	(cd "$dir" && GOWORK=off go build -o /dev/null ./...) || { echo "module $dir does not build without go.work" >&2; exit 1; }
done

say "go vet (every module)"
go vet "${pkgs[@]}"

say "go build (every module, examples included)"
go build -o /dev/null "${pkgs[@]}"

say "go test -race (every module)"
go test -race -count=1 "${pkgs[@]}"
