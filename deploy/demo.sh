#!/usr/bin/env bash
# deploy/demo.sh — the whole job in one command, on a fresh Debian/Ubuntu
# machine: installs the build dependencies, builds seqgate, starts it beside
# librdkafka's in-process mock Kafka cluster (--embedded-kafka), feeds a
# CloudEvents order stream with every kind of trouble seqgate handles (retried
# duplicates, same id with a different payload, v3 before v2, a gap filled
# later, a gap that times out, COMPLETED -> CREATED, a gap resolved by a
# snapshot from the aggregate's authority; on a second topic, ledger, a deposed
# leader's epoch-1 events fenced after epoch 2 began), stops seqgate with
# SIGTERM and prints, in a few readable lines (deploy/demo/report.py): each
# input event with what became of it (its place in the output topic, its DLQ
# reason, or why it was dropped), each DLQ record's detail, and the key
# counters of /metrics with their names. It also runs `seqgatectl dlq
# summary`, `lookup`, `inspect` and `audit` of the input topic
# (docs/seqgatectl.md) and checks their answers; --tools prints them.
#
# The authority is deploy/authority/authority.py (Python standard library
# only), answering snapshot requests over HTTP on a free loopback port from
# deploy/demo/authority-states.json: it knows order-1006 (version 3, SHIPPED)
# and answers 404 for order-1005.
#
# The build's own output goes to a log file (its path is printed; on a
# failed build its last lines are shown).
#
# Usage: ./deploy/demo.sh [--passthrough] [--no-build] [--no-deps] [--keep]
#                         [--tools]
#   --passthrough  run the benchmark baseline instead of the engine (plumbing
#                  check only: everything is copied, nothing decided)
#   --no-build     use the existing build/seqgate (or $SEQGATE_BIN)
#   --no-deps      build without installing packages first (they are
#                  installed already, or this is not Debian/Ubuntu)
#   --keep         keep the temporary directory (config.json, the store,
#                  seqgate.log) and print its path, so that the seqgatectl
#                  commands it names can be run again
#   --tools        also print what seqgatectl dlq summary, lookup, inspect
#                  and audit answered about the run
# Exit status 0 when seqgate stopped cleanly and (engine mode) the output
# matches deploy/demo/expected.txt.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
demo="$here/demo"
mode=engine
build=1
deps=1
keep=0
tools=0
for a in "$@"; do
        case "$a" in
        --passthrough) mode=passthrough ;;
        --no-build) build=0 ;;
        --no-deps) deps=0 ;;
        --keep) keep=1 ;;
        --tools) tools=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "demo.sh: unknown argument $a" >&2; exit 2 ;;
        esac
done

say() { printf '\n== %s\n' "$*"; }

# binaries named relative to where the demo was started (the build step
# changes directory)
for v in SEQGATE_BIN SEQGATECTL_BIN; do
        case "${!v:-/}" in
        /*) ;;
        *) export "$v=$PWD/${!v}" ;;
        esac
done

# 1. dependencies and build ------------------------------------------------
if [ "$build" = 1 ]; then
        # what the installer and the build print goes to a log, one line
        # here; a failure shows the log's end
        blog="${TMPDIR:-/tmp}/seqgate-demo-build.log"
        : >"$blog"
        failed() {
                echo "demo.sh: $1 failed; the last lines of $blog:" >&2
                tail -n 25 "$blog" >&2
                exit 1
        }
        if [ "$deps" = 1 ]; then
                # only the demo's packages (the build's, kcat, python3), not
                # the test suite's broker toolchain, clang or browser
                say "installing what the demo needs (tests/install-deps.sh --demo; log: $blog)"
                "$top/tests/install-deps.sh" --demo >>"$blog" 2>&1 ||
                        failed "installing the packages"
        fi
        say "building seqgate and seqgatectl (meson, ninja; log: $blog)"
        cd "$top"
        if [ ! -f build/build.ninja ]; then
                meson setup build >>"$blog" 2>&1 || failed "meson setup"
        fi
        ninja -C build seqgate seqgatectl >>"$blog" 2>&1 || failed "the build"
        echo "built seqgate and seqgatectl in $top/build"
fi
bin="${SEQGATE_BIN:-$top/build/seqgate}"
ctl="${SEQGATECTL_BIN:-$top/build/seqgatectl}"
[ -x "$bin" ] || { echo "demo.sh: $bin not found (build first)" >&2; exit 1; }
[ -x "$ctl" ] || { echo "demo.sh: $ctl not found (build first)" >&2; exit 1; }
command -v kcat >/dev/null || { echo "demo.sh: kcat not installed" >&2; exit 1; }
command -v python3 >/dev/null || { echo "demo.sh: python3 not installed" >&2; exit 1; }

# 2. start seqgate with an embedded Kafka ------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/seqgate-demo.XXXXXX")
pid=""
auth_pid=""
cleanup() {
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                kill -TERM "$pid" 2>/dev/null || true
                wait "$pid" 2>/dev/null || true
        fi
        if [ -n "$auth_pid" ] && kill -0 "$auth_pid" 2>/dev/null; then
                kill -TERM "$auth_pid" 2>/dev/null || true
                wait "$auth_pid" 2>/dev/null || true
        fi
        if [ "$keep" = 1 ]; then
                echo
                echo "kept (--keep): $tmp — config.json, the store (data/), seqgate.log;"
                echo "  the store-reading commands above run again as printed; the embedded"
                echo "  Kafka is gone. Remove it with: rm -rf $tmp"
        else
                rm -rf "$tmp"
        fi
}
trap cleanup EXIT

# The aggregates' authority, for snapshot refetch (HTTP, any free port); the
# config's snapshot.url gets that port.
say "starting the order authority (deploy/authority/authority.py, HTTP)"
python3 "$top/deploy/authority/authority.py" \
        --states "$demo/authority-states.json" --http 127.0.0.1:0 \
        --prefix orders >"$tmp/authority.out" 2>"$tmp/authority.log" &
auth_pid=$!
for _ in $(seq 100); do
        [ -s "$tmp/authority.out" ] && break
        kill -0 "$auth_pid" 2>/dev/null || break
        sleep 0.1
done
auth_addr=$(grep -o '"http": "[^"]*"' "$tmp/authority.out" | cut -d'"' -f4 || true)
if [ -z "$auth_addr" ]; then
        echo "demo.sh: the authority did not start; its log:" >&2
        cat "$tmp/authority.log" >&2
        exit 1
fi
echo "authority at http://$auth_addr/orders/{aggregate}"
sed -e "s|http://127.0.0.1:8080/orders/|http://$auth_addr/orders/|" \
        -e "s|\"data_dir\": \"[^\"]*\"|\"data_dir\": \"$tmp/data\"|" \
        "$demo/config.json" >"$tmp/config.json"

flags=()
[ "$mode" = passthrough ] && flags+=(--passthrough)
say "starting seqgate ($mode) with an embedded Kafka cluster"
"$bin" --config "$tmp/config.json" --data-dir "$tmp/data" \
        --embedded-kafka --bootstrap-file "$tmp/bootstrap" \
        "${flags[@]}" 2>"$tmp/seqgate.log" &
pid=$!

for _ in $(seq 100); do
        [ -s "$tmp/bootstrap" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
done
if [ ! -s "$tmp/bootstrap" ]; then
        echo "demo.sh: seqgate did not start; its log:" >&2
        cat "$tmp/seqgate.log" >&2
        exit 1
fi
bs=$(cat "$tmp/bootstrap")
echo "bootstrap.servers = $bs"

# Last value of a counter in seqgate's stats log lines ("name":N): the loop
# counts records of committed batches, so when records_in_total reaches the
# number produced, their output is in orders.clean / orders.dlq.
counter() {
        grep '"event":"stats"' "$tmp/seqgate.log" | tail -n 1 |
                grep -o "\"$1\":[0-9-]*" | cut -d: -f2 || true
}
# Waits (up to $2 tenths of a second) until "$1" (a shell test) holds.
wait_for() {
        for _ in $(seq "$2"); do
                eval "$1" && return 0
                kill -0 "$pid" 2>/dev/null || return 1
                sleep 0.1
        done
        return 1
}

# Stops the demo if seqgate is gone, showing why.
alive() {
        kill -0 "$pid" 2>/dev/null && return 0
        wait "$pid" || echo "demo.sh: seqgate exited with status $?" >&2
        pid=""
        echo "demo.sh: seqgate stopped unexpectedly; its log (stats lines left out):" >&2
        grep -v '"event":"stats"' "$tmp/seqgate.log" | tail -n 40 >&2
        exit 1
}

# 3. feed the order stream ----------------------------------------------------
produce() { # FILE [TOPIC]
        kcat -P -b "$bs" -t "${2:-orders}" -K '|' \
                -H content-type=application/cloudevents+json <"$1"
}
n1=$(wc -l <"$demo/orders.txt")
n2=$(wc -l <"$demo/orders-late.txt")
say "producing $n1 CloudEvents (structured mode) to topic orders"
produce "$demo/orders.txt"
# The ledger topic's writers are leaders with terms (ordering.epoch,
# semantics §4b): a deposed epoch-1 leader goes on writing after epoch 2
# began; what it writes is fenced.
n3=$(wc -l <"$demo/ledger.txt")
say "producing $n3 CloudEvents with an epoch (leader term) to topic ledger"
produce "$demo/ledger.txt" ledger

# seqgate joins its consumer group, reads everything and commits.
wait_for '[ "$(counter records_in_total)" = "$((n1 + n3))" ]' 200 ||
        echo "demo.sh: seqgate has not consumed all $((n1 + n3)) records (yet)" >&2
alive

if [ "$mode" = engine ]; then
        # order-1005 waits for v2 with v3 parked, order-1006 for v2 with v3
        # and v4 parked; gap_timeout_ms is 3000. Then seqgate asks the
        # authority: order-1006 is resolved by a snapshot, order-1005 is
        # unknown to it (404 to each request) and goes to the gap policy.
        say "waiting for the gaps of order-1005 and order-1006 (gap_timeout_ms 3000, then a snapshot request each)"
        wait_for '[ "$(counter snapshot_applied_total)" = 1 ]' 150 ||
                echo "demo.sh: no snapshot applied" >&2
        wait_for '[ "$(counter gap_timeouts_total)" = 1 ]' 100 ||
                echo "demo.sh: no gap timeout seen" >&2
        alive
fi
say "producing $n2 late event (order-1005 v2, after its gap timed out)"
produce "$demo/orders-late.txt"
wait_for '[ "$(counter records_in_total)" = "$((n1 + n2 + n3))" ]' 100 ||
        echo "demo.sh: the late record was not consumed" >&2
alive

# 3b. the HTTP endpoint: a few lines of /metrics ---------------------------
# (http.address 127.0.0.1:0 in the demo config: the port is in the
# http_listening log line)
http_port=$(grep '"event":"http_listening"' "$tmp/seqgate.log" |
        grep -o '"port":[0-9]*' | cut -d: -f2 || true)
if [ -n "$http_port" ] && command -v curl >/dev/null; then
        # shown after the records (report.py metrics): the key counters
        curl -fsS "http://127.0.0.1:$http_port/metrics" >"$tmp/metrics.txt" ||
                echo "demo.sh: /metrics did not answer" >&2
        curl -fsS "http://127.0.0.1:$http_port/readyz" >"$tmp/readyz.json" ||
                echo "demo.sh: /readyz is not ready" >&2
else
        echo "demo.sh: no http_listening line (or no curl): /metrics skipped" >&2
fi
alive

# 4. read the results (the embedded cluster lives inside seqgate) -----------
# key<TAB>headers<TAB>value, one record a line.
kcat -C -b "$bs" -t orders.clean -o beginning -e -q \
        -f '%k\t%h\t%s\n' >"$tmp/clean.tsv"
kcat -C -b "$bs" -t orders.dlq -o beginning -e -q \
        -f '%k\t%h\t%s\n' >"$tmp/dlq.tsv"
for t in clean dlq; do
        kcat -C -b "$bs" -t "ledger.$t" -o beginning -e -q \
                -f '%k\t%h\t%s\n' >"$tmp/ledger.$t.tsv"
done

# The audit of the input topic, while the embedded cluster still runs:
# seqgatectl reads it with its own group-less reader (nothing committed,
# nothing produced) through the engine over a temporary store, refetch
# unavailable (so order-1006's gap, resolved live by a snapshot, is a gap
# that timed out here). Printed at the end.
python3 - "$tmp/config.json" "$bs" "$tmp/audit-config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["kafka"]["bootstrap.servers"] = sys.argv[2]
json.dump(c, open(sys.argv[3], "w"))
PY
audit_rc=0
"$ctl" audit --config "$tmp/audit-config.json" --topic orders \
        >"$tmp/audit.txt" 2>"$tmp/audit.err" || audit_rc=$?
# What the DLQ topics hold, the same way (docs/seqgatectl.md "seqgatectl dlq:
# what is in the DLQ"); printed after the records themselves.
dlq_rc=0
"$ctl" dlq summary --config "$tmp/audit-config.json" \
        >"$tmp/dlq-summary.txt" 2>"$tmp/dlq-summary.err" || dlq_rc=$?
show_audit() {
        if [ "$audit_rc" != 0 ]; then
                echo "demo.sh: seqgatectl audit failed (exit $audit_rc):" >&2
                cat "$tmp/audit.err" >&2
                exit 1
        fi
        [ "$tools" = 1 ] || return 0
        say "seqgatectl audit --topic orders (what the input topic holds)"
        echo "(an offline replay of the input through the engine over a temporary"
        echo " store, without the snapshot authority: order-1006's gap, resolved live"
        echo " by a snapshot, counts here as a gap that timed out, so its gap_timeout"
        echo " and quarantine counts exceed the live run's by that aggregate)"
        cat "$tmp/audit.txt"
}

# 5. stop seqgate: it finishes its batch, commits, leaves the group ----------
say "stopping seqgate (SIGTERM)"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
echo "seqgate exited with status $status"

# 6. print ---------------------------------------------------------------------
# The value is a structured CloudEvent: pick sequence and type out of it.
# A header value is the text after "NAME=" up to the next ",__seqgate." (kcat
# joins headers with commas; a detail may contain one).
fmt='
function attr(v, name,   m) {
        if (match(v, "\"" name "\":\"[^\"]*\"")) {
                m = substr(v, RSTART, RLENGTH)
                sub("^\"" name "\":\"", "", m); sub("\"$", "", m)
                return m
        }
        return "?"
}
function hdr(h, name,   i, rest, j) {
        i = index(h, name "=")
        if (!i) return ""
        rest = substr(h, i + length(name) + 1)
        j = index(rest, ",__seqgate.")
        return j ? substr(rest, 1, j - 1) : rest
}
BEGIN { FS = "\t" }
!dlq && (snap = hdr($2, "__seqgate.snapshot")) != "" {
        # a snapshot record: value = data from the authority; version and
        # state in headers
        line = sprintf("%s S%s snapshot %s", $1, snap,
                       hdr($2, "__seqgate.snapshot.state"))
        print line > out
        printf "  %s   <- from the authority, data: %s\n", line, $3
        next
}
{
        line = sprintf("%s v%s %s", $1, attr($3, "sequence"), attr($3, "type"))
        if (dlq) {
                line = line " " hdr($2, "__seqgate.errors.reason")
                detail = hdr($2, "__seqgate.errors.detail")
        }
        print line > out
        if (dlq) printf "  %s\n      detail: %s\n", line, detail
        else printf "  %s\n", line
}'
# the comparison's lines (deploy/demo/expected.txt), not printed
for t in clean dlq ledger.clean ledger.dlq; do
        dlq=0
        [ "${t%dlq}" != "$t" ] && dlq=1
        awk -v dlq="$dlq" -v out="$tmp/actual.$t" "$fmt" "$tmp/$t.tsv" >/dev/null
        : >>"$tmp/actual.$t"
done

report="$here/demo/report.py"
say "what went in, and what became of it (off = the input offset; #N = the place in the output topic)"
python3 "$report" events orders orders.clean orders.dlq "$tmp/clean.tsv" \
        "$tmp/dlq.tsv" "$demo/orders.txt" "$demo/orders-late.txt"
echo
python3 "$report" events ledger ledger.clean ledger.dlq \
        "$tmp/ledger.clean.tsv" "$tmp/ledger.dlq.tsv" "$demo/ledger.txt"

say "key metrics (GET /metrics before the stop, summed over the topics)"
if [ -s "$tmp/metrics.txt" ]; then
        python3 "$report" metrics "$tmp/metrics.txt" "$tmp/readyz.json" \
                "http://${http_port:+127.0.0.1:$http_port}/metrics"
else
        echo "  (no /metrics scrape: see the messages above)"
fi

if [ "$status" != 0 ]; then
        echo "demo.sh: seqgate exited with status $status; its log:" >&2
        grep -v '"event":"stats"' "$tmp/seqgate.log" | tail -n 20 >&2
        exit 1
fi
if [ "$mode" = passthrough ]; then
        echo
        echo "passthrough mode: every input record was copied; nothing decided."
        show_audit
        exit 0
fi

# 6a. the seqgatectl answers about the run: checked always, printed with
# --tools (tool = the heading and the file its answer is in)
tool() {
        [ "$tools" = 1 ] || return 0
        say "$1"
        cat "$2"
}
if [ "$dlq_rc" != 0 ]; then
        echo "demo.sh: seqgatectl dlq summary failed (exit $dlq_rc):" >&2
        cat "$tmp/dlq-summary.err" >&2
        exit 1
fi
tool "seqgatectl dlq summary (every dlq_topic of the config)" \
        "$tmp/dlq-summary.txt"

# 6b. what happened to event X? (docs/troubleshooting.md "What happened to
# event X?") ------------------------------------------------------------------
ctl="${SEQGATECTL_BIN:-$(dirname "$bin")/seqgatectl}"
if [ -x "$ctl" ]; then
        for id in e-1002-2b e-1001-2; do
                # both events are known to the store: anything but exit 0
                # is a fault the demo must not hide
                if ! "$ctl" lookup --config "$tmp/config.json" --topic orders \
                        --source /shop/orders --id "$id" >"$tmp/lookup.txt" \
                        2>"$tmp/lookup.err"; then
                        echo "demo.sh: FAIL: lookup of $id did not answer" >&2
                        exit 1
                fi
                tool "seqgatectl lookup --config $tmp/config.json --topic orders --source /shop/orders --id $id" \
                        "$tmp/lookup.txt"
        done
        # what is left for an operator: the aggregates the store holds
        # quarantined, refetching or with parked events (docs/seqgatectl.md)
        if ! "$ctl" inspect --config "$tmp/config.json" --topic orders \
                2>/dev/null >"$tmp/inspect.txt"; then
                echo "demo.sh: FAIL: inspect did not answer" >&2
                exit 1
        fi
        tool "seqgatectl inspect --config $tmp/config.json --topic orders (aggregates that need attention)" \
                "$tmp/inspect.txt"
        # the scenario leaves exactly order-1005 quarantined: say so only
        # when the store agrees
        if [ "$(grep -c '^  - id: ' "$tmp/inspect.txt")" != 1 ] ||
                ! grep -q '^  - id: order-1005$' "$tmp/inspect.txt" ||
                ! grep -q '^      quarantined: yes$' "$tmp/inspect.txt"; then
                echo "demo.sh: FAIL: expected order-1005 alone to need attention" >&2
                exit 1
        fi
        # its snapshot requests, as the log counted them (the metrics'
        # snapshot_failures_total and snapshot_gave_up_total)
        nfail=$(grep -c '"event":"snapshot_attempt_failed".*"aggregate":"order-1005"' \
                "$tmp/seqgate.log" || true)
        say "left for an operator"
        echo "order-1005 stays quarantined (seqgatectl inspect): its gap timed out and"
        echo "the authority answered 404 to all $nfail of its snapshot requests, so its"
        echo "later events go to the DLQ (aggregate_quarantined) until an operator"
        echo "releases it: seqgatectl release --config FILE --topic orders --aggregate"
        echo "order-1005 (docs/troubleshooting.md)."
        if [ "$tools" = 0 ]; then
                echo "--tools also prints what seqgatectl dlq summary, lookup, inspect and"
                echo "audit answered about this run; --keep keeps its config, store and log."
        fi
else
        echo "demo.sh: $ctl not found: no lookups shown" >&2
fi

# 7. compare with deploy/demo/expected.txt -------------------------------------
section() { # prints the non-comment lines of a "[name]" section
        awk -v s="[$1]" '$0 == s { on = 1; next } /^\[/ { on = 0 }
                on && $0 !~ /^#/ && NF' "$demo/expected.txt"
}
section clean >"$tmp/expected.clean"
section dlq >"$tmp/expected.dlq"
section ledger.clean >"$tmp/expected.ledger.clean"
section ledger.dlq >"$tmp/expected.ledger.dlq"
ok=1
for t in clean dlq ledger.clean ledger.dlq; do
        name=$t
        [ "${t#ledger.}" = "$t" ] && name="orders.$t"
        if ! diff -u "$tmp/expected.$t" "$tmp/actual.$t" >"$tmp/diff.$t"; then
                ok=0
                echo
                echo "$name differs from deploy/demo/expected.txt:"
                cat "$tmp/diff.$t"
        fi
done
show_audit
echo
if [ "$ok" = 1 ]; then
        echo "OK: orders.clean, orders.dlq, ledger.clean and ledger.dlq match deploy/demo/expected.txt"
        exit 0
fi
echo "MISMATCH: see the differences above" >&2
exit 1
