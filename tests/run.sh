#!/usr/bin/env bash
# tests/run.sh: seqgate's single test command (CI runs it through .ci/run).
#
# Phases, each with a banner, its time in seconds and PASS/FAIL:
#   deps                    tests/install-deps.sh (Debian packages, Python venv)
#   build (normal)          meson setup build + ninja
#   unit tests (normal)     meson test -C build (the Check suites, and the
#                           "deploy" suite: tests/deploy checks deploy/,
#                           docs/man and the completion against the binaries),
#                           then pytest bench/test_bench.py (the benchmark's
#                           generator, sampler and percentile arithmetic) and
#                           tests/chaos/test_probes.py (the harnesses' Kafka
#                           probes, on librdkafka's mock cluster) and
#                           tests/chaos/test_restores.py (the chaos suite's
#                           count of the moves standbys served)
#   build (release, -O3)    build-rel with --buildtype=release -Dtests=false:
#                           the Dockerfile's and the benchmark's build, whose
#                           optimizer finds warnings -Werror makes errors
#   build (sanitizers)      build-san with -Db_sanitize=address,undefined
#   unit tests (sanitizers) meson test -C build-san, ASan/UBSan aborting on error
#   fuzz                    tests/fuzz/run.sh: every tests/fuzz/fuzz_*.c
#                           libFuzzer target (clang, ASan+UBSan) for
#                           $SG_FUZZ_SECONDS seconds each (default 20), seeded
#                           from tests/fuzz/corpus/; fails on any crash, leak
#                           or UB and prints the input that did it
#   schema examples         tests/schema/check_examples.py build/seqgate (if present)
#   debian package          only with --deb (CI's .ci/run passes it):
#                           tests/deploy/check_deb.sh, dpkg-buildpackage of
#                           debian/ (the project compiled again, a few
#                           minutes), lintian failing on errors and
#                           warnings, the .deb's contents, and seqgate
#                           --version run from it unpacked (dpkg -x) into
#                           a fake root; deps then installs debhelper and
#                           lintian
#   format                  every tracked C file is as .clang-format lays it
#                           out (clang-format --dry-run -Werror); fix with
#                           git ls-files '*.c' '*.h' | xargs clang-format -i
#   scan-build              clang's static analyzer (scan-build, Debian
#                           clang-tools) over a fresh build-scan/ (every
#                           target, the tests too); fails on any report and
#                           names the HTML report dir. A false positive is
#                           suppressed in the code with a one-line reason
#                           (CONTRIBUTING.md "Static analysis")
#   integration tests       pytest tests/integration against a real Kafka broker:
#                           $KAFKA_BOOTSTRAP if set, otherwise one started with
#                           deploy/kafka/kafka.sh and stopped on exit (also on
#                           failure or ctrl-c); side by side
#                           ($SG_INTEGRATION_JOBS pytest-xdist workers), then
#                           the tests marked serial alone
#   chaos suite             tests/chaos/run_chaos.py three times:
#                           exactly_once (the default run), at_least_once
#                           (--quick), exactly_once with standby replicas
#                           (--quick --standbys 1; fails unless a standby
#                           served a partition move): seqgate instances
#                           killed, rebalanced and a broker restart,
#                           checked against an independently computed
#                           result (at_least_once: duplicates are counted,
#                           loss and disorder fail). Each run starts its own
#                           private broker (it restarts it), never the one
#                           above nor $KAFKA_BOOTSTRAP
# A phase whose prerequisite failed is counted as failed without running.
# The last line is "N passed, M failed" over the phases; the exit status is
# non-zero if any phase failed.
#
# Flags:
#   --unit         unit phases only (deps, builds, unit tests, fuzz, the demo,
#                  schema examples)
#   --no-san       skip the sanitizer build and its tests
#   --no-fuzz      skip the fuzz phase
#   --integration  integration only (deps, normal build for build/seqgate,
#                  integration tests; runs the tests even if the build failed)
#   --no-build     with --integration: use build/seqgate as it is
#   --no-chaos     skip the chaos suite
#   --deb          also the Debian package phase (off by default: it
#                  compiles the project once more and installs debhelper
#                  and lintian)
#   --no-scan-build  skip the scan-build phase (on by default with the
#                  unit phases; deps installs clang-tools for it).
#                  --unit --no-san --no-fuzz is a quick analyzer run;
#                  --scan-build is accepted (the default)
#
# Environment: KAFKA_BOOTSTRAP (use this cluster), SG_VENV (venv dir),
# SG_INTEGRATION_TIMEOUT (seconds for the integration phase's pytest runs,
# default 2400), SG_INTEGRATION_JOBS (integration tests run at once,
# pytest-xdist workers on the one broker, then the tests marked serial
# alone; default twice the cores; 1: one at a time, one run), PYTEST_ARGS
# (extra pytest arguments, split on spaces; for a -k expression with
# spaces use pytest's own PYTEST_ADDOPTS="-k 'a or b'"), SG_CHAOS_ARGS (extra
# arguments of the first chaos run, e.g. "--seed 42" or "--mode
# at_least_once"), SG_CHAOS_ALOS_ARGS (of the at_least_once run, e.g.
# "--seed 42"), SG_CHAOS_SBY_ARGS (of the standby run, e.g. "--seed 42" or
# "--instances 3 --standbys 2"), SG_CHAOS_TIMEOUT (seconds for each chaos
# run, default 600),
# SG_FUZZ_SECONDS (seconds per fuzz target, default 20; the phase takes
# about that times the number of targets, plus the build).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

do_unit=1 do_san=1 do_integration=1 do_build=1 do_chaos=1 do_fuzz=1
do_scan=1 do_deb=0
for arg in "$@"; do
    case $arg in
    --unit) do_integration=0 ;;
    --no-san) do_san=0 ;;
    --no-fuzz) do_fuzz=0 ;;
    --integration) do_unit=0 do_san=0 do_fuzz=0 do_scan=0 ;;
    --no-build) do_build=0 ;;
    --no-chaos) do_chaos=0 ;;
    --scan-build) do_scan=1 ;;
    --no-scan-build) do_scan=0 ;;
    --deb) do_deb=1 ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "run.sh: unknown argument '$arg' (try --help)" >&2
        exit 2
        ;;
    esac
done

passed=0 failed=0
results=()
declare -A status=()

now() { date +%s.%N; }

# run_phase KEY "TITLE" FUNCTION: runs FUNCTION in a subshell with errexit on,
# prints the banner and the verdict with its duration, records the result.
run_phase() {
    local key=$1 title=$2 fn=$3 t0 t1 secs rc
    echo
    echo "== $title"
    t0=$(now)
    set +e
    (
        set -e
        "$fn"
    )
    rc=$?
    set -e
    t1=$(now)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    if ((rc == 0)); then
        status[$key]=pass
        passed=$((passed + 1))
        echo "-- $title: PASS (${secs}s)"
        results+=("PASS  ${secs}s  $title")
    else
        status[$key]=fail
        failed=$((failed + 1))
        echo "-- $title: FAIL, exit $rc (${secs}s)"
        results+=("FAIL  ${secs}s  $title")
    fi
}

# not_run KEY "TITLE" REASON: counts a phase that could not run as failed.
not_run() {
    local key=$1 title=$2 reason=$3
    echo
    echo "== $title"
    echo "-- $title: FAIL, not run: $reason"
    status[$key]=fail
    failed=$((failed + 1))
    results+=("FAIL  -  $title (not run: $reason)")
}

# --- broker lifecycle (parent shell, so the trap can always stop it) --------
KAFKA_SH=$ROOT/deploy/kafka/kafka.sh
broker_workdir=""

stop_broker() {
    if [[ -n $broker_workdir ]]; then
        KAFKA_WORKDIR=$broker_workdir "$KAFKA_SH" stop || true
        rm -rf "$broker_workdir"
        broker_workdir=""
    fi
}
trap stop_broker EXIT
trap 'echo "run.sh: interrupted" >&2; stop_broker; exit 130' INT TERM

# --- phases ----------------------------------------------------------------
VENV_PY=""

DEPS_OUT=$(mktemp)
phase_deps() {
    local args=()
    ((do_scan)) && args+=(--scan-build)
    ((do_deb)) && args+=(--deb)
    "$ROOT/tests/install-deps.sh" "${args[@]}" >"$DEPS_OUT"
}

meson_setup() { # DIR [meson -D options...]
    local dir=$1
    shift
    if [[ -f $dir/meson-private/coredata.dat ]]; then
        meson setup --reconfigure "$dir" "$@"
    else
        meson setup "$dir" "$@"
    fi
}

phase_build_normal() {
    meson_setup build
    ninja -C build
}

# The optimized build the Dockerfile, the Debian package's users and the
# benchmark run: -O3 finds -Werror warnings (maybe-uninitialized, format
# truncation) that the debug build's -O2 does not.
phase_build_release() {
    meson_setup build-rel --buildtype=release -Dtests=false
    ninja -C build-rel
}

# meson runs as many tests at once as there are cores; the Kafka-loop suites
# mostly wait on the mock cluster's group protocol (tests/unit/meson.build),
# so twice as many slots keep the cores busy while they wait.
UNIT_JOBS=$(($(nproc) * 2))

phase_unit_normal() {
    meson test -C build --print-errorlogs --num-processes "$UNIT_JOBS" || return
    # the benchmark's own arithmetic (gen.py, measure.py, latency_tool,
    # scale_prime's plan): no broker, a few seconds; a wrong percentile is a
    # wrong published figure. The test harnesses' probes of a consumer
    # group's offsets: a crash of the client library takes down the chaos
    # suite or pytest itself.
    LATENCY_TOOL="$ROOT/build/bench/latency_tool" \
        SCALE_PRIME_TOOL="$ROOT/build/bench/scale_prime" \
        "$VENV_PY" -m pytest -q "$ROOT/bench/test_bench.py" \
        "$ROOT/tests/chaos/test_probes.py" "$ROOT/tests/chaos/test_restores.py"
}

SAN_OPTS=(-Db_sanitize=address,undefined -Db_lundef=false)

phase_build_san() {
    meson_setup build-san "${SAN_OPTS[@]}"
    ninja -C build-san
}

phase_unit_san() {
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C build-san --print-errorlogs --num-processes "$UNIT_JOBS"
}

phase_fuzz() {
    SG_FUZZ_SECONDS=${SG_FUZZ_SECONDS:-20} "$ROOT/tests/fuzz/run.sh"
}

# A fresh directory every time: the analyzer sees only what is compiled,
# so nothing may be up to date. --status-bugs makes any report fail it.
phase_scan_build() {
    local dir=$ROOT/build-scan
    rm -rf "$dir"
    local sb=(scan-build --status-bugs --use-cc=clang -o "$dir/reports")
    "${sb[@]}" meson setup "$dir"
    "${sb[@]}" ninja -C "$dir"
}

# The house style is kept applied, so a diff never mixes layout with
# substance. bench/streams-peer is Java and not ours to lay out.
# The demo is one of the two commands (docs/testing.md; the front page's
# first commands): it must
# work at every submission, and it checks its own output against
# deploy/demo/expected.txt.
phase_demo() {
    ./deploy/demo.sh --no-build
}

phase_deb() {
    "$ROOT/tests/deploy/check_deb.sh"
}

phase_format() {
    git -C "$ROOT" ls-files '*.c' '*.h' | grep -v '^bench/streams-peer/' |
        (cd "$ROOT" && xargs clang-format --dry-run -Werror)
}

phase_schema() {
    "$VENV_PY" tests/schema/check_examples.py build/seqgate
}

# The last commit of store format 2 on the main line (the first parent of the
# merge that brought format 3): tests/integration/test_store_upgrade.py runs
# it beside this build in one consumer group (docs/upgrade.md "Rolling
# upgrade"). Built from the repository's own history (git archive: the work
# tree is not touched) unless SEQGATE_OLD_BIN names a binary; about 10 s.
OLD_FORMAT2_COMMIT=51d39c8

build_old_bin() {
    [[ -n ${SEQGATE_OLD_BIN:-} ]] && return 0
    local dir=$ROOT/build/old-format2
    if [[ ! -x $dir/build/seqgate ]]; then
        if ! git -C "$ROOT" cat-file -e "$OLD_FORMAT2_COMMIT^{commit}" 2>/dev/null; then
            echo "no commit $OLD_FORMAT2_COMMIT in this clone (shallow?): the rolling-upgrade tests will skip"
            return 0
        fi
        rm -rf "$dir" && mkdir -p "$dir"
        git -C "$ROOT" archive "$OLD_FORMAT2_COMMIT" | tar -x -C "$dir" &&
            meson setup "$dir/build" "$dir" -Dtests=false >/dev/null &&
            ninja -C "$dir/build" seqgate >/dev/null || {
            echo "building the store format 2 seqgate ($OLD_FORMAT2_COMMIT) failed" >&2
            return 1
        }
    fi
    export SEQGATE_OLD_BIN=$dir/build/seqgate
    echo "SEQGATE_OLD_BIN=$SEQGATE_OLD_BIN (store format 2, commit $OLD_FORMAT2_COMMIT)"
}

# Integration tests at once (pytest-xdist workers): they mostly wait on the
# broker (group joins, session timeouts, restores), so twice as many as
# there are cores keep them busy. SG_INTEGRATION_JOBS=1 runs them one at a
# time, in one pytest run, as before.
INTEGRATION_JOBS=$(($(nproc) * 2))

phase_integration() {
    build_old_bin || return
    if [[ -n ${KAFKA_BOOTSTRAP:-} ]]; then
        echo "using the Kafka cluster at KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP"
    else
        echo "starting a Kafka broker (deploy/kafka/kafka.sh)"
        local t0
        t0=$(now)
        KAFKA_BOOTSTRAP=$(KAFKA_WORKDIR=$broker_workdir "$KAFKA_SH" start)
        awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "broker ready in %.1fs\n", b - a }'
    fi
    export KAFKA_BOOTSTRAP
    local rc=0 jobs=${SG_INTEGRATION_JOBS:-$INTEGRATION_JOBS}
    local deadline=$((SECONDS + ${SG_INTEGRATION_TIMEOUT:-2400}))
    # pytest_run ARGS...: pytest with what is left of the phase's time
    pytest_run() {
        # shellcheck disable=SC2086
        timeout --foreground --signal=INT --kill-after=60 \
            "$((deadline > SECONDS ? deadline - SECONDS : 1))" \
            "$VENV_PY" -m pytest -q --durations=15 "$@" tests/integration \
            ${PYTEST_ARGS:-}
    }
    if ((jobs > 1)); then
        # Side by side on the one broker (pytest-xdist; --dist loadgroup
        # keeps an xdist_group on one worker), then the tests marked serial
        # alone (tests/integration/conftest.py). Exit 5, "no tests
        # selected", is a -k or -m that matched only the other run's tests.
        local rc1=0 rc2=0
        echo "side by side: $jobs workers (SG_INTEGRATION_JOBS), then the serial tests alone"
        pytest_run -n "$jobs" --dist loadgroup --serial=exclude || rc1=$?
        # not after an interrupt (pytest's 2) or the phase's timeout (124)
        if ((rc1 != 2 && rc1 != 124)); then
            echo "-- the tests marked serial, alone"
            pytest_run -n 0 --serial=only || rc2=$?
        else
            rc2=$rc1
        fi
        if ((rc1 == 5 && rc2 == 5)); then
            rc=5
        elif ((rc1 != 0 && rc1 != 5)); then
            rc=$rc1
        elif ((rc2 != 5)); then
            rc=$rc2
        fi
    else
        pytest_run || rc=$?
    fi
    if ((rc != 0)) && [[ -n $broker_workdir ]]; then
        echo "--- broker log tail (integration tests failed, exit $rc) ---"
        KAFKA_WORKDIR=$broker_workdir "$KAFKA_SH" logs 40 || true
    fi
    return "$rc"
}

phase_chaos() {
    # Its own private broker: the suite restarts it, so it must not be the
    # integration phase's broker nor a cluster given in KAFKA_BOOTSTRAP.
    # All three runs always run; the phase fails if any does.
    local rc=0
    # shellcheck disable=SC2086
    env -u KAFKA_BOOTSTRAP -u KAFKA_WORKDIR \
        timeout --foreground --signal=INT --kill-after=60 "${SG_CHAOS_TIMEOUT:-600}" \
        "$VENV_PY" tests/chaos/run_chaos.py ${SG_CHAOS_ARGS:-} || rc=$?
    # at_least_once with instances moving partitions between their stores
    # (semantics §6: the changelog); shorter, after the exactly_once run.
    # shellcheck disable=SC2086
    env -u KAFKA_BOOTSTRAP -u KAFKA_WORKDIR \
        timeout --foreground --signal=INT --kill-after=60 "${SG_CHAOS_TIMEOUT:-600}" \
        "$VENV_PY" tests/chaos/run_chaos.py --mode at_least_once --quick \
        ${SG_CHAOS_ALOS_ARGS:-} || rc=$?
    # exactly_once with standby replicas (semantics §6 "Standby replicas"):
    # a third, short run, not the default run with standbys: the default
    # configuration (standby_replicas 0, every moved partition restored from
    # its new owner's own checkpoint or the changelog's start) keeps its
    # full-length run. It fails unless a standby served a partition move.
    # shellcheck disable=SC2086
    env -u KAFKA_BOOTSTRAP -u KAFKA_WORKDIR \
        timeout --foreground --signal=INT --kill-after=60 "${SG_CHAOS_TIMEOUT:-600}" \
        "$VENV_PY" tests/chaos/run_chaos.py --mode exactly_once --quick \
        --standbys 1 ${SG_CHAOS_SBY_ARGS:-} || rc=$?
    return "$rc"
}

# --- main ------------------------------------------------------------------
run_phase deps "deps (tests/install-deps.sh)" phase_deps
if [[ ${status[deps]:-} == pass ]]; then
    VENV_PY=$(tail -n 1 "$DEPS_OUT")
fi
rm -f "$DEPS_OUT"

if [[ ${status[deps]:-} != pass ]]; then
    # Nothing else can work without the toolchain.
    ((do_unit)) && not_run build "build (normal)" "deps failed"
    ((do_integration)) && not_run integration "integration tests" "deps failed"
else
    if ((do_unit)) || ((do_integration && do_build)); then
        run_phase build "build (normal)" phase_build_normal
    fi
    if ((do_unit)); then
        if [[ ${status[build]:-} == pass ]]; then
            run_phase unit "unit tests (normal)" phase_unit_normal
        else
            not_run unit "unit tests (normal)" "build failed"
        fi
        run_phase build_rel "build (release, -O3)" phase_build_release
        if ((do_san)); then
            run_phase build_san "build (sanitizers)" phase_build_san
            if [[ ${status[build_san]:-} == pass ]]; then
                run_phase unit_san "unit tests (sanitizers)" phase_unit_san
            else
                not_run unit_san "unit tests (sanitizers)" "sanitizer build failed"
            fi
        fi
        if ((do_fuzz)); then
            run_phase fuzz "fuzz (tests/fuzz/run.sh)" phase_fuzz
        fi
        if ((do_scan)); then
            run_phase scan_build "scan-build (clang static analyzer)" phase_scan_build
        fi
        if [[ ${status[build]:-} == pass ]]; then
            run_phase demo "demo (deploy/demo.sh, embedded Kafka)" phase_demo
        else
            not_run demo "demo (deploy/demo.sh, embedded Kafka)" "build failed"
        fi
        if ((do_deb)); then
            run_phase deb "debian package (tests/deploy/check_deb.sh)" phase_deb
        fi
        if [[ -f .clang-format ]] && git -C "$ROOT" rev-parse >/dev/null 2>&1; then
            run_phase format "format (.clang-format)" phase_format
        fi
        if [[ -f tests/schema/check_examples.py ]]; then
            if [[ ${status[build]:-} == pass ]]; then
                run_phase schema "schema examples" phase_schema
            else
                not_run schema "schema examples" "build failed"
            fi
        fi
    fi
    if ((do_integration)); then
        if [[ -z ${KAFKA_BOOTSTRAP:-} ]]; then
            broker_workdir=$(mktemp -d "${TMPDIR:-/tmp}/seqgate-run-kafka.XXXXXX")
        fi
        run_phase integration "integration tests" phase_integration
        stop_broker
        if ((do_chaos)); then
            if [[ -x build/seqgate ]] && [[ ${status[build]:-pass} == pass ]]; then
                run_phase chaos "chaos suite" phase_chaos
            else
                not_run chaos "chaos suite" "no build/seqgate (build failed)"
            fi
        fi
    fi
fi

echo
echo "== summary"
for r in "${results[@]}"; do
    echo "  $r"
done
echo "$passed passed, $failed failed"
((failed == 0))
