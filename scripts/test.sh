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

if ! command -v go >/dev/null 2>&1; then
	if [ -x /usr/local/go/bin/go ]; then
		export PATH="/usr/local/go/bin:$PATH"
	else
		echo "go is not installed: install Go 1.24 or newer (https://go.dev/dl/)" >&2
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

say "go $(go env GOVERSION): downloading modules"
go mod download

say "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi

say "go vet ./..."
go vet ./...

say "go build ./... (examples included)"
go build ./...

say "go test -race ./..."
go test -race -count=1 ./...
