#!/usr/bin/env bash
# tests/fuzz/run.sh: build and run seqgate's libFuzzer targets.
#
# Usage: tests/fuzz/run.sh [SECONDS] [NAME...]
#
# Every tests/fuzz/fuzz_NAME.c is a target (found by name: add a file, it is
# built and run; nothing lists them). Each is built with
# `clang -fsanitize=fuzzer,address,undefined` against the library sources
# (every lib/*.c, compiled once per run into build-fuzz/obj and reused while
# unchanged), seeded from tests/fuzz/corpus/NAME/ (committed seeds, never
# written to) and run for SECONDS seconds (default $SG_FUZZ_SECONDS, else
# 20) with -max_total_time. NAME... runs only those targets.
#
# A crash, a leak (LeakSanitizer), undefined behaviour (UBSan, not
# recoverable), a timeout or out-of-memory stops that target; the script
# prints the input that did it (build-fuzz/artifacts/NAME/crash-..., and
# leak-, timeout-, oom-) and how to replay it, goes on with the other
# targets, and exits 1 at the end. Build failures also exit 1.
#
# Inputs the fuzzer found interesting are kept in build-fuzz/corpus/NAME/
# for the next run (they are not committed; to keep one as a seed, copy it
# into tests/fuzz/corpus/NAME/).
#
# Environment:
#   SG_FUZZ_SECONDS  default SECONDS per target (20)
#   SG_FUZZ_DIR      work directory (default build-fuzz under the repo)
#   SG_FUZZ_CC       the compiler (default clang)
#   SG_FUZZ_ARGS     extra libFuzzer arguments, split on spaces (e.g.
#                    "-jobs=2 -workers=2" or "-max_len=65536")
#   SG_FUZZ_TIMEOUT  seconds one input may take before it counts as a hang
#                    (libFuzzer -timeout, default 10)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FUZZ=$ROOT/tests/fuzz
WORK=${SG_FUZZ_DIR:-$ROOT/build-fuzz}
CC=${SG_FUZZ_CC:-clang}
SECS=${SG_FUZZ_SECONDS:-20}
if (($# > 0)) && [[ $1 =~ ^[0-9]+$ ]]; then
    SECS=$1
    shift
fi
ONLY=("$@")

log() { printf 'fuzz: %s\n' "$*" >&2; }

if ! command -v "$CC" >/dev/null 2>&1; then
    log "error: $CC not found (Debian: apt-get install clang libclang-rt-14-dev; tests/install-deps.sh does)"
    exit 1
fi

# The same dependencies as meson.build's libseqgate: a library added there
# must be added here too, or every target fails to link.
PKGS=(rdkafka lmdb libcjson yajl libcrypto libcurl libmicrohttpd)
if ! CFLAGS_DEPS=$(pkg-config --cflags "${PKGS[@]}") ||
    ! LIBS_DEPS=$(pkg-config --libs "${PKGS[@]}"); then
    log "error: pkg-config cannot find the library dependencies (${PKGS[*]})"
    exit 1
fi
# libxcrypt (bcrypt hashes, lib/http_auth.c): pkg-config where it ships a
# .pc file, else plain -lcrypt, as meson.build finds it.
LIBS_DEPS+=" $(pkg-config --libs libxcrypt 2>/dev/null || echo -lcrypt)"

# Instrumented for coverage and both sanitizers; UB aborts so the fuzzer
# sees it. Warnings are shown but not fatal here: the meson builds own
# -Werror.
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all)
CFLAGS=(-std=c11 -g -O1 -fno-omit-frame-pointer -D_GNU_SOURCE -Wall -Wextra
    "${SAN[@]}" -I"$ROOT/lib")
# shellcheck disable=SC2206
CFLAGS+=($CFLAGS_DEPS)

mkdir -p "$WORK/obj" "$WORK/bin"

# --- the library, compiled once with fuzzer-no-link coverage --------------
# An object is rebuilt when it is older than its source, any lib/*.h or
# this script.
lib_objs=()
newest_hdr=$(ls -t "$ROOT"/lib/*.h "$0" | head -n 1)
for src in "$ROOT"/lib/*.c; do
    obj=$WORK/obj/$(basename "${src%.c}").o
    if [[ ! -f $obj || $src -nt $obj || $newest_hdr -nt $obj ]]; then
        log "cc $(basename "$src")"
        "$CC" "${CFLAGS[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
    fi
    lib_objs+=("$obj")
done

# --- targets ---------------------------------------------------------------
targets=()
for src in "$FUZZ"/fuzz_*.c; do
    [[ -e $src ]] || continue
    name=$(basename "$src" .c)
    name=${name#fuzz_}
    if ((${#ONLY[@]})); then
        keep=0
        for o in "${ONLY[@]}"; do [[ $o == "$name" ]] && keep=1; done
        ((keep)) || continue
    fi
    targets+=("$name")
done
if ((${#targets[@]} == 0)); then
    log "error: no targets (tests/fuzz/fuzz_*.c${ONLY[*]:+ matching ${ONLY[*]}})"
    exit 1
fi

failed=()
passed=()
for name in "${targets[@]}"; do
    src=$FUZZ/fuzz_$name.c
    bin=$WORK/bin/fuzz_$name
    seeds=$FUZZ/corpus/$name
    corpus=$WORK/corpus/$name
    artifacts=$WORK/artifacts/$name
    mkdir -p "$corpus" "$artifacts"
    log "build fuzz_$name"
    if ! "$CC" "${CFLAGS[@]}" -fsanitize=fuzzer "$src" "${lib_objs[@]}" \
        $LIBS_DEPS -lpthread -o "$bin"; then
        log "fuzz_$name: BUILD FAILED"
        failed+=("$name (build)")
        continue
    fi
    dirs=("$corpus")
    if [[ -d $seeds ]]; then
        dirs+=("$seeds")
    else
        log "fuzz_$name: no seeds in tests/fuzz/corpus/$name/ (starting empty)"
    fi
    log "run fuzz_$name for ${SECS}s"
    rm -f "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* \
        "$artifacts"/oom-* "$artifacts"/slow-unit-*
    rc=0
    # shellcheck disable=SC2086
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
        "$bin" "${dirs[@]}" -max_total_time="$SECS" \
        -timeout="${SG_FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 \
        ${SG_FUZZ_ARGS:-} >"$WORK/fuzz_$name.log" 2>&1 || rc=$?
    found=$(ls "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* \
        "$artifacts"/oom-* 2>/dev/null || true)
    if ((rc != 0)) || [[ -n $found ]]; then
        log "fuzz_$name: FAILED (exit $rc); last lines of $WORK/fuzz_$name.log:"
        tail -n 40 "$WORK/fuzz_$name.log" >&2
        for f in $found; do
            log "fuzz_$name: crashing input: $f"
            log "  replay: $bin $f"
        done
        failed+=("$name")
    else
        stats=$(grep -E '^stat::number_of_executed_units' "$WORK/fuzz_$name.log" | awk '{print $2}')
        cov=$(grep -oE 'cov: [0-9]+' "$WORK/fuzz_$name.log" | tail -n 1 || true)
        log "fuzz_$name: ok (${stats:-?} runs, ${cov:-cov ?}, corpus $(ls "$corpus" | wc -l) inputs)"
        passed+=("$name")
    fi
done

log "${#passed[@]} passed, ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
((${#failed[@]} == 0))
