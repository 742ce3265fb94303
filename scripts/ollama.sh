#!/usr/bin/env bash
# Builds the `ollama` server (v0.17.4, CPU only) that memstack's Ollama
# integration tests run, once per machine, and prints the binary's path on
# stdout (progress goes to stderr). When the binary is already built it only
# prints the path.
#
# Usage:   MEMSTACK_OLLAMA_BIN=$(./scripts/ollama.sh)
# Env:     MEMSTACK_OLLAMA_BIN     an existing binary to use as is (no build)
#          MEMSTACK_OLLAMA_PREFIX  build cache, default
#                                  ${XDG_CACHE_HOME:-$HOME/.cache}/memstack/ollama
#                                  (the binary is $PREFIX/bin/ollama; kept
#                                  outside the repository on purpose)
#
# Why not a plain `go install github.com/ollama/ollama@v0.17.4`: the module
# zip lacks llama.cpp's vendor/ headers. Debian's nlohmann-json3-dev and
# libstb-dev provide two of them (installed here with apt-get when running as
# root), and scripts/ollama/miniaudio.h stands in for the third (audio input
# to multimodal models is unsupported in this build; text inference is
# unaffected). The build takes about 3 minutes on 2 cores; -g is dropped
# from the cgo flags to make it faster.
set -euo pipefail

readonly OLLAMA_VERSION=0.17.4
here="$(cd "$(dirname "$0")" && pwd)"

die() { printf 'scripts/ollama.sh: %s\n' "$*" >&2; exit 1; }
say() { printf '==> %s\n' "$*" >&2; }

if [ -n "${MEMSTACK_OLLAMA_BIN:-}" ]; then
	[ -f "$MEMSTACK_OLLAMA_BIN" ] && [ -x "$MEMSTACK_OLLAMA_BIN" ] || die "MEMSTACK_OLLAMA_BIN=$MEMSTACK_OLLAMA_BIN is not an executable file (unset it to build one)"
	printf '%s\n' "$MEMSTACK_OLLAMA_BIN"
	exit 0
fi

cache_home="${XDG_CACHE_HOME:-${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}/.cache}"
prefix="${MEMSTACK_OLLAMA_PREFIX:-$cache_home/memstack/ollama}"
bin="$prefix/bin/ollama"
if [ -f "$bin" ] && [ -x "$bin" ]; then
	printf '%s\n' "$bin"
	exit 0
fi

command -v go >/dev/null 2>&1 || { [ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"; } ||
	die "go is not installed: install Go 1.24 or newer to build ollama"
# The C/C++ compilers and the headers the module zip lacks.
pkgs=()
command -v gcc >/dev/null 2>&1 || pkgs+=(gcc)
command -v g++ >/dev/null 2>&1 || pkgs+=(g++)
[ -f /usr/include/nlohmann/json_fwd.hpp ] || pkgs+=(nlohmann-json3-dev)
[ -f /usr/include/stb/stb_image.h ] || pkgs+=(libstb-dev)
if [ ${#pkgs[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		say "installing ${pkgs[*]} (needed to build ollama)"
		export DEBIAN_FRONTEND=noninteractive
		if ! apt-get install -y -qq "${pkgs[@]}" >&2; then
			{ apt-get update -qq >&2 && apt-get install -y -qq "${pkgs[@]}" >&2; } ||
				die "apt-get could not install ${pkgs[*]}"
		fi
	else
		die "building ollama needs ${pkgs[*]}: run 'sudo apt-get install -y ${pkgs[*]}' and retry"
	fi
fi

mkdir -p "$prefix/bin" "$prefix/inc/miniaudio" || die "cannot create $prefix"
cp "$here/ollama/miniaudio.h" "$prefix/inc/miniaudio/miniaudio.h"

# One build at a time per prefix (two test runs may start together).
if command -v flock >/dev/null 2>&1; then
	exec 9>"$prefix/.lock"
	flock 9
	if [ -f "$bin" ] && [ -x "$bin" ]; then # built by the run we waited for
		printf '%s\n' "$bin"
		exit 0
	fi
fi

tmpbin="$(mktemp -d "$prefix/bin.XXXXXX")"
trap 'rm -rf "$tmpbin"' EXIT
say "building ollama v$OLLAMA_VERSION into $prefix (once per machine: 3 to 8 minutes on 2 cores)"
start=$(date +%s)
# Run outside the repository so its go.mod plays no part.
if ! (cd "$prefix" && CGO_ENABLED=1 GOFLAGS= GOBIN="$tmpbin" \
	CGO_CPPFLAGS="-I$prefix/inc" CGO_CFLAGS=-O2 CGO_CXXFLAGS=-O2 \
	go install -trimpath -ldflags="-s -w -X github.com/ollama/ollama/version.Version=$OLLAMA_VERSION" \
	"github.com/ollama/ollama@v$OLLAMA_VERSION" >&2); then
	die "building ollama v$OLLAMA_VERSION failed (see the compiler output above)"
fi
[ -x "$tmpbin/ollama" ] || die "go install finished but $tmpbin/ollama is missing"
mv "$tmpbin/ollama" "$bin"
say "built $bin in $(($(date +%s) - start)) s"
printf '%s\n' "$bin"
