#!/usr/bin/env bash
# tests/stress/eos_loop.sh [RUNS]: the exactly_once and restart integration
# tests, RUNS times (default 50), on a machine kept busy by CPU hogs — the
# conditions under which timing-dependent faults show (a reader that stops
# before the last transaction's markers, a broker that answers "not leader"
# for a topic just created, ...). Not part of tests/run.sh: it takes about
# RUNS x 2 minutes.
#
#   1. starts one CPU hog (a busy shell loop) per core (nproc), so the
#      broker, seqgate and the tests fight for the CPU;
#   2. starts one private Kafka broker (deploy/kafka/kafka.sh, its own work
#      dir and ports);
#   3. runs pytest on tests/integration/test_exactly_once.py,
#      test_restart.py and test_takeover_fence.py RUNS times against it, each run with
#      its own pytest base temp dir (seqgate's logs are there);
#   4. keeps the pytest output and the temp dir of every failing run, removes
#      those of passing runs, and prints one line per run and the summary
#      line "eos_loop: runs=N failed=M" (exit status 1 if M > 0).
# The hogs and the broker are stopped on exit, also on failure or ctrl-c.
#
# Environment: SG_VENV (venv dir, as tests/run.sh; created with
# tests/install-deps.sh when missing), SEQGATE_KAFKA_CACHE (broker jars),
# SEQGATE_BIN (default build/seqgate, built if missing), SG_STRESS_DIR
# (where to keep the failing runs; default a new /tmp/seqgate-eos-loop.*),
# SG_STRESS_HOGS (number of CPU hogs, default nproc; 0: none),
# PYTEST_ARGS (extra pytest arguments, e.g. "-k zombie"), SG_STRESS_TESTS
# (the test files, default the two above; e.g.
# tests/integration/test_broker_restart.py for broker outages: it restarts a
# broker of its own).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

RUNS=${1:-50}
if ! [[ $RUNS =~ ^[0-9]+$ ]] || ((RUNS < 1)); then
    echo "usage: tests/stress/eos_loop.sh [RUNS]   (RUNS >= 1, default 50)" >&2
    exit 2
fi
HOGS=${SG_STRESS_HOGS:-$(nproc)}
OUT=${SG_STRESS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/seqgate-eos-loop.XXXXXX")}
mkdir -p "$OUT"
KAFKA_SH=$ROOT/deploy/kafka/kafka.sh

log() { printf 'eos_loop: %s\n' "$*" >&2; }

# --- python and seqgate -----------------------------------------------------
if [[ -n ${SG_VENV:-} && -x $SG_VENV/bin/python ]]; then
    PY=$SG_VENV/bin/python
else
    PY=$("$ROOT/tests/install-deps.sh" | tail -n 1)
fi
export SEQGATE_BIN=${SEQGATE_BIN:-$ROOT/build/seqgate}
if [[ ! -x $SEQGATE_BIN ]]; then
    log "building $SEQGATE_BIN"
    [[ -f build/meson-private/coredata.dat ]] || meson setup build >&2
    ninja -C build >&2
fi

# --- hogs and broker, stopped on exit ----------------------------------------
hog_pids=()
broker_dir=$OUT/broker
broker_up=0
cleanup() {
    for pid in "${hog_pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${hog_pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    hog_pids=()
    if ((broker_up)); then
        KAFKA_WORKDIR=$broker_dir "$KAFKA_SH" stop >/dev/null 2>&1 || true
        broker_up=0
    fi
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

log "starting a Kafka broker (work dir $broker_dir)"
broker_up=1
BOOTSTRAP=$(KAFKA_WORKDIR=$broker_dir "$KAFKA_SH" start)
export KAFKA_BOOTSTRAP=$BOOTSTRAP
log "broker at $BOOTSTRAP; $HOGS CPU hog(s) on $(nproc) core(s)"
for ((i = 0; i < HOGS; i++)); do
    (while :; do :; done) &
    hog_pids+=($!)
done

# --- the runs -------------------------------------------------------------------
failed=0
failed_runs=()
t_start=$(date +%s)
for ((run = 1; run <= RUNS; run++)); do
    out=$OUT/run-$run.log
    base=$OUT/run-$run.tmp
    t0=$(date +%s)
    rc=0
    # shellcheck disable=SC2086
    "$PY" -m pytest -q -p no:cacheprovider --basetemp="$base" \
        ${SG_STRESS_TESTS:-tests/integration/test_exactly_once.py tests/integration/test_restart.py tests/integration/test_takeover_fence.py} \
        ${PYTEST_ARGS:-} >"$out" 2>&1 || rc=$?
    secs=$(($(date +%s) - t0))
    summary=$(grep -E '[0-9]+ (passed|failed|error)' "$out" | tail -n 1 || true)
    if ((rc == 0)); then
        rm -rf "$out" "$base"
        log "run $run/$RUNS: ok (${secs}s) ${summary}"
    else
        failed=$((failed + 1))
        failed_runs+=("$run")
        log "run $run/$RUNS: FAILED, exit $rc (${secs}s) ${summary}; kept $out and $base"
        grep -E '^(FAILED|ERROR) ' "$out" | sed 's/^/eos_loop:   /' >&2 || true
    fi
done
cleanup

log "total $(($(date +%s) - t_start))s; failing runs: ${failed_runs[*]:-none}; kept in $OUT"
echo "eos_loop: runs=$RUNS failed=$failed"
((failed == 0))
