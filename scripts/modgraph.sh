#!/usr/bin/env bash
# Measures what memstack costs a user's program, as issue 12 asks: the
# modules its graph adds to langchaingo's, the shared modules it bumps, and
# the binary size, for the program in scripts/modgraph/mem (a conversation
# chain with TokenWindow + Summary + Facts + Recall under one CombinedMemory
# budget) against scripts/modgraph/lc (the same chain on langchaingo's
# ConversationTokenBuffer). Each is built as a user's own module would be,
# outside the workspace, against the core module of this checkout.
#
# Usage: ./scripts/modgraph.sh        (prints a Markdown table)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

langchaingo=$(GOWORK=off go list -m -f '{{.Version}}' github.com/tmc/langchaingo)
build() { # name, extra go.mod lines
	local dir="$tmp/$1"
	mkdir -p "$dir"
	cp "$root/scripts/modgraph/$1/main.go" "$dir/"
	(
		cd "$dir"
		go mod init "example.com/$1" >/dev/null 2>&1
		go mod edit -require="github.com/tmc/langchaingo@$langchaingo"
		if [ "$1" = mem ]; then
			go mod edit -require=github.com/memstack/memstack@v0.0.0-00010101000000-000000000000 \
				-replace=github.com/memstack/memstack="$root"
		fi
		go mod tidy >/dev/null 2>&1
		go build -trimpath -o "$dir/bin" .
		"$dir/bin" >/dev/null 2>&1 || { echo "scripts/modgraph/$1 does not run" >&2; exit 1; }
		go list -m all | tail -n +2 | sort >"$dir/modules"
	)
}
build lc
build mem

# Modules by path: added (not in the baseline at all) and bumped (a higher
# version than the baseline's).
added=$(join -v1 <(awk '{print $1}' "$tmp/mem/modules" | grep -v '^github.com/memstack/' | sort) \
	<(awk '{print $1}' "$tmp/lc/modules" | sort))
bumped=$(join <(sort "$tmp/mem/modules") <(sort "$tmp/lc/modules") | awk '$2 != $3 {print $1 " " $3 " → " $2}')
lc_size=$(stat -c %s "$tmp/lc/bin")
mem_size=$(stat -c %s "$tmp/mem/bin")

echo "| measure | value |"
echo "|---|---|"
echo "| modules in langchaingo $langchaingo's graph (the baseline program) | $(wc -l <"$tmp/lc/modules") |"
echo "| modules memstack's core adds | $(printf '%s' "$added" | grep -c . || true): $(echo $added | sed 's/ /, /g') |"
echo "| shared modules whose version it raises | $(printf '%s' "$bumped" | grep -c . || true)$( [ -n "$bumped" ] && printf ': %s' "$(echo "$bumped" | paste -sd ';' | sed 's/;/; /g')") |"
echo "| baseline binary (ConversationTokenBuffer) | $((lc_size / 1024)) KiB |"
echo "| memstack binary (TokenWindow + Summary + Facts + Recall, budget) | $((mem_size / 1024)) KiB |"
awk -v a="$mem_size" -v b="$lc_size" 'BEGIN { printf "| ratio | %.2f× |\n", a / b }'

# Each backend module's graph against the core's.
echo
echo "| module | modules it adds to the core's graph |"
echo "|---|---|"
# go list -m all may add go.sum lines (-mod=mod): run it on copies, so
# the committed go.mod and go.sum files stay as they are.
modules_of() { # module dir
	local copy="$tmp/modfile-${1//\//-}"
	cp "$root/$1/go.mod" "$copy.mod"
	cp "$root/$1/go.sum" "$copy.sum"
	(cd "$root/$1" && go list -modfile="$copy.mod" -m all | tail -n +2 | awk '{print $1}' | grep -v '^github.com/memstack/' | sort)
}
core_mods=$(modules_of .)
for dir in store/sqlitestore store/redisstore store/pgstore observe/otelobserve adapters/adk; do
	mods=$(modules_of "$dir")
	extra=$(join -v1 <(echo "$mods") <(echo "$core_mods"))
	n=$(printf '%s' "$extra" | grep -c . || true)
	extra=$(echo $extra | sed 's/ /, /g')
	if [ "$n" -eq 0 ]; then
		extra="(none)"
	elif [ "$n" -gt 20 ]; then
		# A large graph (ADK's: Google Cloud, gRPC, genai): its count and
		# the module's own direct requirements.
		direct=$(cd "$root/$dir" && go list -modfile="$tmp/modfile-${dir//\//-}.mod" -m -f '{{if not .Indirect}}{{.Path}}{{end}}' all | tail -n +2 | grep -v '^github.com/memstack/' | grep . | sort)
		extra="$n modules, for $(echo $direct | sed 's/ /, /g')"
	fi
	echo "| \`$dir\` | $extra |"
done
