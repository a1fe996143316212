#!/usr/bin/env bash
# bench/run.sh — seqgate's throughput benchmark against a real Kafka broker.
#
# Compares runs over the same input, three of the same Kafka loop
# (lib/kafka.c) and one of a Kafka Streams application:
#   plain          `seqgate --passthrough`: every input record copied to the
#                  output topic, no state (the baseline: a librdkafka
#                  consume→produce loop)
#   at_least_once  `seqgate`, guarantee at_least_once: the engine (dedup,
#                  per-aggregate ordering, state machine, LMDB store with
#                  syncs deferred to the changelog, input offsets committed
#                  every commit_interval_ms), idempotent producer, and the
#                  changelog (a record per changed store key, written after
#                  the batch's output, then one marker per partition)
#   exactly_once   `seqgate`, guarantee exactly_once: the same engine, plus a
#                  changelog record per changed store key, every batch in one
#                  Kafka transaction (output, DLQ, changelog, input offsets)
#   streams        the Kafka Streams peer (bench/streams-peer, Java, Kafka
#                  Streams 4.1.1): the same job with the Processor API, three
#                  RocksDB stores with changelogs, exactly_once_v2, one
#                  stream thread; built with bench/streams-peer/build.sh
# All seqgate runs use the same librdkafka properties and batch settings;
# the peer commits (one transaction) every batch.max_records records and
# polls as many (bench/streams-peer/streams-peer.properties holds the rest
# of its tuning). Every run has a fresh consumer group, fresh output/DLQ
# topics, a fresh data_dir (the peer's state.dir) and (both guarantees,
# streams) fresh changelog topics, which seqgate or Kafka Streams creates
# (<group.id>-<topic>-changelog; <application.id>-<store>-changelog).
# A run's time is measured from process start until the group's committed
# offsets reach the input topic's end offsets (polled every 200 ms); then the
# process gets SIGTERM. Runs alternate plain, at_least_once, exactly_once,
# streams, plain, ... and the report gives the median of each.
# After every exactly_once and streams run: its output is read back
# read_committed (exactly the distinct events, each aggregate's versions once
# and in order), and its changelog is read to measure bytes per input event.
# After the last exactly_once run: restore time. A fresh instance on the same
# group with an EMPTY data_dir restores the whole changelog (full); restarted
# with that data_dir kept, it restores only the delta. See bench/README.md.
# --latency (after the throughput runs): end-to-end latency at a paced input
# rate, per mode: a fresh input topic with message.timestamp.type=
# LogAppendTime, the process under test started first, then the input
# produced at 50 % of that mode's median events/s (or --latency-rate N)
# by a paced C producer (bench/latency_tool produce, gen.py's records from
# a file) while a C read_committed consumer (latency_tool consume) reads
# the output: per output record, the time it became visible there minus its
# input record's broker append time. p50/p90/p99/max per mode, and the
# measuring consumer's own floor (the input records' append → seen delay).
# --scale N: every mode but plain runs on the same stream (--events,
# --aggregates, then --scale-probes probes) with a small store
# (--scale-base aggregates, default 10000) and a large one (N aggregates,
# one event each, and their N dedup keys) side by side; --scale-dedup D adds,
# for the seqgate modes, a store of N aggregates and D live dedup keys. The
# store is primed through its changelog (bench/scale_prime: seqgate's
# written by libseqgate's engine itself, the peer's in its format) before
# the process starts; the process restores it, then reads the stream. The
# stream's events/s is measured from the end of the restore to the end,
# beside the restore rate, bytes per key on disk, pages written per event,
# I/O pressure, Dirty/Writeback and RSS peaks. --scale-rounds R runs the
# small and the large store R times in turn (small, large, small, large,
# ...: each pair minutes apart, so that the machine's drift between them
# stays small) and reports each pair's ratio and their median.
# --scale-prime input: the older way, N priming records in the input topic
# read by the process.
#
# Usage: bench/run.sh [--events N] [--aggregates N] [--rounds N]
#                     [--warmup N] [--batch-records N] [--batch-ms N]
#                     [--modes LIST] [--no-restore]
#                     [--consumer-prop k=v]... [--producer-prop k=v]...
#                     [--streams-prop k=v]... [--no-verify] [--keep]
#                     [--latency] [--latency-rate N] [--latency-events N]
#                     [--scale N] [--scale-base N] [--scale-dedup D]
#                     [--scale-probes N] [--scale-prime changelog|input]
#                     [--scale-rounds R]
# Defaults: 1000000 events, 100000 aggregates, 2 rounds, batch.max_records
# 10000, batch.max_ms 100, the librdkafka properties listed below, and
# --modes plain,at_least_once,exactly_once,streams.
# --warmup N (default 1): untimed pass-through runs first, so that no
# measured run meets a cold broker JVM.
# --modes: a comma-separated subset of plain, at_least_once, exactly_once,
# streams.
# --no-restore: skip the restore measurement.
# --latency-rate N (default: 50 % of the mode's median events/s),
# --latency-events N (default --events): the latency phase's settings; each
# implies --latency (--latency-producers is refused: one C producer paces
# any rate). --scale-base N (default 10000): the comparison run's priming.
# --scale-dedup D: also seqgate with N aggregates and D live dedup keys
# (D/N events per aggregate; long: 100 M keys take about an hour here).
# --scale-probes N (default 100): records appended to the stream that only
# a primed store answers as checked (a dedup hit and a stale_version DLQ
# record per probe). --scale-prime changelog (default) | input.
# --streams-prop k=v: a Kafka Streams / client / peer.* property for the
# streams runs (overrides streams-peer.properties and the batch mapping:
# peer.commit.every.records, max.poll.records and
# buffered.records.per.partition = --batch-records).
# Environment:
#   KAFKA_BOOTSTRAP  use this broker instead of starting one (the changelog's
#                    on-disk size is then estimated; KAFKA_LOG_DIR, the
#                    broker's log.dirs, gives the real one)
#   SEQGATE          the binary (default build/seqgate)
#   LATENCY_TOOL     the latency phase's producer/consumer (default
#                    bench/latency_tool beside SEQGATE's build dir)
#   SCALE_PRIME_TOOL the --scale phase's priming tool (default
#                    bench/scale_prime beside SEQGATE's build dir)
#   SEQGATECTL       for the --scale phase's bytes per record (default
#                    seqgatectl beside SEQGATE)
#   BENCH_DIR        work dir for configs, logs, stores, results
#                    (default: a new temp dir, removed unless --keep)
#   PYTHON           python with confluent-kafka (default build/venv/bin/python)
#   JAVA             java for the streams runs (default java)
#   STREAMS_JAVA_OPTS  JVM options of the streams runs
#                    (default "-Xms512m -Xmx512m")
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SEQGATE=${SEQGATE:-$ROOT/build/seqgate}
PY=${PYTHON:-$ROOT/build/venv/bin/python}
JAVA=${JAVA:-java}
STREAMS_JAVA_OPTS=${STREAMS_JAVA_OPTS:--Xms512m -Xmx512m}

EVENTS=1000000
AGGREGATES=100000
ROUNDS=2
WARMUP=1
BATCH_RECORDS=10000
BATCH_MS=100
VERIFY=1
KEEP=0
MODES=plain,at_least_once,exactly_once,streams
RESTORE=1
LATENCY=0
LAT_RATE=0   # 0: 50 % of the mode's median events/s
LAT_EVENTS=  # default: --events
LAT_FAILED=0 # a latency run failed (not started, incomplete, timestamps)
SCALE=0
SCALE_BASE=10000
SCALE_DEDUP=0
SCALE_PROBES=100
SCALE_ROUNDS=1
SCALE_PRIME=changelog
# librdkafka properties given to BOTH runs (the tuning of docs/benchmarks.md);
# --consumer-prop / --producer-prop override or add, by name.
CONSUMER_PROPS=(max.partition.fetch.bytes=8388608 queued.min.messages=500000)
PRODUCER_PROPS=(linger.ms=5 batch.num.messages=10000 batch.size=4000000)
# Kafka Streams properties of the streams runs, after streams-peer.properties
# and the batch mapping (--streams-prop).
STREAMS_PROPS=()

die() { printf 'bench/run.sh: error: %s\n' "$*" >&2; exit 1; }
log() { printf 'bench/run.sh: %s\n' "$*" >&2; }

while (($#)); do
    case $1 in
    --events) EVENTS=$2; shift 2 ;;
    --aggregates) AGGREGATES=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --batch-records) BATCH_RECORDS=$2; shift 2 ;;
    --batch-ms) BATCH_MS=$2; shift 2 ;;
    --consumer-prop) CONSUMER_PROPS+=("$2"); shift 2 ;;
    --producer-prop) PRODUCER_PROPS+=("$2"); shift 2 ;;
    --streams-prop) STREAMS_PROPS+=("$2"); shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --no-restore) RESTORE=0; shift ;;
    --latency) LATENCY=1; shift ;;
    --latency-rate) LATENCY=1; LAT_RATE=$2; shift 2 ;;
    --latency-events) LATENCY=1; LAT_EVENTS=$2; shift 2 ;;
    --latency-producers) die "--latency-producers is gone: one paced C producer (bench/latency_tool produce) reaches any --latency-rate; drop the option" ;;
    --scale) SCALE=$2; shift 2 ;;
    --scale-base) SCALE_BASE=$2; shift 2 ;;
    --scale-dedup) SCALE_DEDUP=$2; shift 2 ;;
    --scale-probes) SCALE_PROBES=$2; shift 2 ;;
    --scale-prime) SCALE_PRIME=$2; shift 2 ;;
    --scale-rounds) SCALE_ROUNDS=$2; shift 2 ;;
    --no-verify) VERIFY=0; shift ;;
    --keep) KEEP=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done

IFS=, read -r -a MODE_LIST <<<"$MODES"
STREAMS=0
for m in "${MODE_LIST[@]}"; do
    case $m in plain | at_least_once | exactly_once) ;;
    streams) STREAMS=1 ;;
    *) die "--modes: unknown mode '$m' (plain, at_least_once, exactly_once, streams)" ;;
    esac
done
for kv in "${STREAMS_PROPS[@]}"; do
    [[ $kv == ?*=* ]] || die "--streams-prop '$kv' is not name=value"
done
[[ -n $LAT_EVENTS ]] || LAT_EVENTS=$EVENTS
[[ $SCALE =~ ^[0-9]+$ && $SCALE_BASE =~ ^[0-9]+$ ]] || die "--scale/--scale-base: a number of aggregates"
((SCALE == 0 || SCALE > SCALE_BASE)) || die "--scale $SCALE must be above --scale-base $SCALE_BASE"
# the stream's rate starts when the committed offsets pass the priming:
# without priming records there is no such moment
((SCALE_BASE >= 1)) || die "--scale-base must be at least 1 (the base run is primed too)"
[[ $SCALE_PRIME == changelog || $SCALE_PRIME == input ]] || die "--scale-prime: changelog or input"
[[ $SCALE_DEDUP =~ ^[0-9]+$ && $SCALE_PROBES =~ ^[0-9]+$ ]] || die "--scale-dedup/--scale-probes: a number"
[[ $SCALE_ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--scale-rounds: a number of rounds, at least 1"
((SCALE_ROUNDS == 1)) || { ((SCALE)) && [[ $SCALE_PRIME == changelog ]]; } ||
    die "--scale-rounds needs --scale N with --scale-prime changelog (the default)"
((SCALE_DEDUP == 0 || SCALE_DEDUP > SCALE)) || die "--scale-dedup $SCALE_DEDUP must be above --scale $SCALE"
((SCALE == 0)) || [[ $SCALE_PRIME == input ]] || ((SCALE_PROBES >= 1 && SCALE_PROBES <= SCALE_BASE)) ||
    die "--scale-probes must be 1..--scale-base (a probe is a primed aggregate of every store)"
[[ -x $SEQGATE ]] || die "$SEQGATE not built (meson setup build && ninja -C build)"
[[ -x $PY ]] || die "$PY missing (tests/install-deps.sh makes it)"
"$PY" -c 'import confluent_kafka' 2>/dev/null || die "$PY has no confluent-kafka"
[[ -x /usr/bin/time ]] || die "/usr/bin/time missing (Debian: apt-get install time)"
# the latency phase's paced producer and measuring consumer (C, librdkafka)
LATENCY_TOOL=${LATENCY_TOOL:-$(dirname "$SEQGATE")/bench/latency_tool}
((!LATENCY)) || [[ -x $LATENCY_TOOL ]] || die "$LATENCY_TOOL not built (ninja -C build)"
# the --scale phase's priming tool (C, libseqgate + librdkafka) and seqgatectl
SCALE_PRIME_TOOL=${SCALE_PRIME_TOOL:-$(dirname "$SEQGATE")/bench/scale_prime}
SEQGATECTL=${SEQGATECTL:-$(dirname "$SEQGATE")/seqgatectl}
((SCALE == 0)) || [[ $SCALE_PRIME == input || (-x $SCALE_PRIME_TOOL && -x $SEQGATECTL) ]] ||
    die "$SCALE_PRIME_TOOL or $SEQGATECTL not built (ninja -C build)"

if [[ -n ${BENCH_DIR:-} ]]; then
    WORK=$BENCH_DIR
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/seqgate-bench.XXXXXX")
fi
RESULTS=$WORK/results.jsonl
CHANGELOG_RESULTS=$WORK/changelog.jsonl
RESTORE_RESULTS=$WORK/restore.jsonl
LATENCY_RESULTS=$WORK/latency.jsonl
SCALE_RESULTS=$WORK/scale.jsonl
# Every run uses this copy, so a rebuild during the benchmark cannot mix two
# versions of the binary.
cp "$SEQGATE" "$WORK/seqgate"
SEQGATE=$WORK/seqgate
if ((LATENCY)); then
    cp "$LATENCY_TOOL" "$WORK/latency_tool"
    LATENCY_TOOL=$WORK/latency_tool
fi
if ((SCALE)) && [[ $SCALE_PRIME == changelog ]]; then
    cp "$SCALE_PRIME_TOOL" "$WORK/scale_prime"
    cp "$SEQGATECTL" "$WORK/seqgatectl"
    SCALE_PRIME_TOOL=$WORK/scale_prime SEQGATECTL=$WORK/seqgatectl
fi
# The Kafka Streams peer: built (untimed; Maven skips an up-to-date build)
# and copied for the same reason.
PEER_DIR=$ROOT/bench/streams-peer
if ((STREAMS)); then
    log "building the Kafka Streams peer (bench/streams-peer/build.sh)"
    "$PEER_DIR/build.sh" >/dev/null || die "bench/streams-peer/build.sh failed"
    mkdir -p "$WORK/streams-peer"
    cp -r "$PEER_DIR/target/streams-peer.jar" "$PEER_DIR/target/lib" \
        "$PEER_DIR/streams-peer.properties" "$WORK/streams-peer/"
fi
: >"$RESULTS"
: >"$CHANGELOG_RESULTS"
: >"$RESTORE_RESULTS"
: >"$LATENCY_RESULTS"
: >"$SCALE_RESULTS"
: >"$WORK/scale-disk.jsonl"
rm -f "$RESULTS.check" "$SCALE_RESULTS.check"

OWN_BROKER=0
cleanup() {
    if ((OWN_BROKER)); then
        KAFKA_WORKDIR=$WORK/kafka "$ROOT/deploy/kafka/kafka.sh" stop >/dev/null 2>&1 || true
    fi
    if ((!KEEP)) && [[ -z ${BENCH_DIR:-} ]]; then
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

if [[ -n ${KAFKA_BOOTSTRAP:-} ]]; then
    BS=$KAFKA_BOOTSTRAP
    LOG_DIR=${KAFKA_LOG_DIR:-}
else
    OWN_BROKER=1
    BS=$(KAFKA_WORKDIR=$WORK/kafka "$ROOT/deploy/kafka/kafka.sh" start | tail -n1)
    LOG_DIR=$WORK/kafka/data # log.dirs of deploy/kafka/kafka.sh
fi
log "broker $BS; work dir $WORK"

# JSON object members from k=v pairs (values as JSON strings); a later pair
# overrides an earlier one of the same name (the config refuses duplicates).
props_json() {
    local -A val=()
    local -a names=()
    local kv n first=1
    for kv in "$@"; do
        [[ $kv == *=* ]] || die "property '$kv' is not name=value"
        n=${kv%%=*}
        [[ -v val[$n] ]] || names+=("$n")
        val[$n]=${kv#*=}
    done
    for n in "${names[@]}"; do
        ((first)) || printf ','
        first=0
        printf '"%s":"%s"' "$n" "${val[$n]}"
    done
}

RUN_ID=$(date +%s)-$$
IN=bench-in-$RUN_ID
# The Kafka Streams peer's state stores (their changelogs:
# <application.id>-<store>-changelog).
PEER_STORES=(dedup agg parked)

# --- input -----------------------------------------------------------------
# (the throughput runs'; the --scale phase writes its own)
if ((WARMUP + ROUNDS > 0)); then
    "$PY" "$ROOT/bench/measure.py" topics --bootstrap "$BS" "$IN:3"
    log "generating $EVENTS events over $AGGREGATES aggregates into $IN (not timed)"
    "$PY" "$ROOT/bench/gen.py" --bootstrap "$BS" --topic "$IN" --events "$EVENTS" \
        --aggregates "$AGGREGATES" 2> >(grep -v 'Coordinator load in progress' >&2) \
        >"$WORK/manifest.json"
    log "manifest: $(cat "$WORK/manifest.json")"
fi

# --- config ----------------------------------------------------------------
write_config() { # instance group data_dir out dlq file guarantee [input]
    local in=${8:-$IN}
    cat >"$6" <<EOF
{
  "instance_id": "$1",
  "data_dir": "$3",
  "guarantee": "$7",
  "kafka": { "bootstrap.servers": "$BS", "group.id": "$2" },
  "kafka_consumer": { $(props_json "${CONSUMER_PROPS[@]}") },
  "kafka_producer": { $(props_json "${PRODUCER_PROPS[@]}") },
  "store": { "map_size_bytes": 4294967296, "map_growth_bytes": 1073741824 },
  "batch": { "max_records": $BATCH_RECORDS, "max_ms": $BATCH_MS },
  "stats_interval_ms": 10000,
  "http": { "address": "127.0.0.1:0" },
  "topics": {
    "$in": {
      "output_topic": "$4",
      "dlq_topic": "$5",
      "output_partitioning": "input",
      "envelope": {
        "format": "cloudevents",
        "id": "ce:id",
        "scope": ["ce:source"],
        "aggregate": "key",
        "version": "ce:sequence",
        "type": "ce:type"
      },
      "dedup": { "ttl_ms": 604800000 },
      "ordering": {
        "mode": "strict",
        "first_version": 1,
        "new_aggregate": "strict",
        "stale": "dlq",
        "gap_timeout_ms": 300000,
        "gap_policy": "dlq"
      },
      "state_machine": {
        "initial": "NEW",
        "states": ["NEW", "OPEN", "CLOSED"],
        "transitions": [
          { "type": "order.created", "from": ["NEW"],  "to": "OPEN" },
          { "type": "order.updated", "from": ["OPEN"], "to": "OPEN" },
          { "type": "order.closed",  "from": ["OPEN"], "to": "CLOSED" }
        ]
      }
    }
  }
}
EOF
}

# --- runs ------------------------------------------------------------------
# Sets CMD (the command line of a run of mode LABEL) and CMD_DESC.
mode_cmd() { # label tag group data_dir out dlq input
    local label=$1 tag=$2 group=$3 dd=$4 out=$5 dlq=$6 in=$7
    local guarantee=at_least_once args=() cfg=$WORK/$2.json
    [[ $label == exactly_once ]] && guarantee=exactly_once
    if [[ $label == streams ]]; then
        local sp=(peer.commit.every.records="$BATCH_RECORDS" max.poll.records="$BATCH_RECORDS"
            buffered.records.per.partition="$BATCH_RECORDS"
            peer.instance.id="bench-$tag" "${STREAMS_PROPS[@]}") kv
        local -a jopts
        read -r -a jopts <<<"$STREAMS_JAVA_OPTS"
        CMD=("$JAVA" "${jopts[@]}" -cp "$WORK/streams-peer/streams-peer.jar:$WORK/streams-peer/lib/*"
            io.seqgate.bench.streams.Peer --bootstrap "$BS" --application-id "$group"
            --input "$in" --output "$out" --dlq "$dlq" --state-dir "$dd"
            --config "$WORK/streams-peer/streams-peer.properties")
        for kv in "${sp[@]}"; do CMD+=(--prop "$kv"); done
        CMD_DESC="Kafka Streams peer, exactly_once_v2"
    else
        write_config "bench-$tag" "$group" "$dd" "$out" "$dlq" "$cfg" "$guarantee" "$in"
        [[ $label == plain || $label == warmup ]] && args=(--passthrough)
        CMD=("$SEQGATE" "${args[@]}" --config "$cfg")
        CMD_DESC=${args[*]:-engine, $guarantee}
    fi
}

# The last exactly_once run's group, config and changelog (for the restore).
EOS_GROUP= EOS_OUT= EOS_DLQ=
one_run() { # label round
    local label=$1 r=$2 tag=$1-$2
    local out=bench-out-$tag-$RUN_ID dlq=bench-dlq-$tag-$RUN_ID
    local group=bench-$tag-$RUN_ID dd=$WORK/store-$tag
    rm -rf "$dd"
    mkdir -p "$dd"
    "$PY" "$ROOT/bench/measure.py" topics --bootstrap "$BS" "$out:3" "$dlq:3"
    local results=$RESULTS
    [[ $label == warmup ]] && results=$WORK/warmup.jsonl
    mode_cmd "$label" "$tag" "$group" "$dd" "$out" "$dlq" "$IN"
    log "run $tag: $CMD_DESC"
    "$PY" "$ROOT/bench/measure.py" run --bootstrap "$BS" --group "$group" \
        --topic "$IN" --label "$label" --out "$results" --log "$WORK/$tag.log" \
        --time-file "$WORK/$tag.time" --data-dir "$dd" -- "${CMD[@]}" >&2
    case $label in
    at_least_once)
        local v=()
        ((VERIFY)) && [[ $r == 1 ]] && v=(--verify)
        "$PY" "$ROOT/bench/measure.py" check --bootstrap "$BS" --out "$out" \
            --dlq "$dlq" --manifest "$WORK/manifest.json" --results "$RESULTS" \
            "${v[@]}" >&2 || true # recorded in results.jsonl.check
        ;;
    exactly_once)
        # Transactional topics: offsets also hold commit markers, so records
        # are counted by reading them, read_committed, and always verified.
        "$PY" "$ROOT/bench/measure.py" check --bootstrap "$BS" --out "$out" \
            --dlq "$dlq" --manifest "$WORK/manifest.json" --results "$RESULTS" \
            --read-committed --verify >&2 || true
        local cl=$group-$IN-changelog ld=()
        [[ -n $LOG_DIR ]] && ld=(--log-dir "$LOG_DIR")
        log "run $tag: measuring changelog $cl"
        "$PY" "$ROOT/bench/measure.py" changelog --bootstrap "$BS" --topic "$cl" \
            --events "$EVENTS" --label "$tag" --out "$CHANGELOG_RESULTS" \
            "${ld[@]}" >/dev/null
        EOS_GROUP=$group EOS_OUT=$out EOS_DLQ=$dlq
        ;;
    streams)
        # The same checks as exactly_once: read back read_committed.
        "$PY" "$ROOT/bench/measure.py" check --bootstrap "$BS" --out "$out" \
            --dlq "$dlq" --manifest "$WORK/manifest.json" --results "$RESULTS" \
            --read-committed --verify >&2 || true
        local st cls=() ld=()
        for st in "${PEER_STORES[@]}"; do cls+=(--topic "$group-$st-changelog"); done
        [[ -n $LOG_DIR ]] && ld=(--log-dir "$LOG_DIR")
        log "run $tag: measuring changelogs ${cls[*]}"
        "$PY" "$ROOT/bench/measure.py" changelog --bootstrap "$BS" "${cls[@]}" \
            --events "$EVENTS" --label "$tag" --out "$CHANGELOG_RESULTS" \
            "${ld[@]}" >/dev/null
        ;;
    *)
        local counts
        counts=$("$PY" "$ROOT/bench/measure.py" count --bootstrap "$BS" "$out")
        [[ $(
            "$PY" -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' \
                "$counts" "$out"
        ) == "$EVENTS" ]] || log "run $tag: WARNING: plain output count is not $EVENTS ($counts)"
        ;;
    esac
    [[ $KEEP == 1 ]] || rm -rf "$dd"
}

# Restore from the changelog of the last exactly_once run: a new instance
# (another instance_id, as when a partition moves to another machine) on the
# same group, the first one stopped. Its input is fully committed, so all it
# does is restore. Then the same instance again with its data_dir kept.
restore_runs() {
    local dd=$WORK/store-restore cfg=$WORK/restore.json
    rm -rf "$dd"
    mkdir -p "$dd"
    write_config "bench-restore" "$EOS_GROUP" "$dd" "$EOS_OUT" "$EOS_DLQ" \
        "$cfg" exactly_once
    local kind
    for kind in full delta; do
        log "restore ($kind data_dir) on group $EOS_GROUP"
        "$PY" "$ROOT/bench/measure.py" restore --partitions 3 --label "$kind" \
            --out "$RESTORE_RESULTS" --log "$WORK/restore-$kind.log" \
            --time-file "$WORK/restore-$kind.time" --data-dir "$dd" -- \
            "$SEQGATE" --config "$cfg" >&2
    done
    [[ $KEEP == 1 ]] || rm -rf "$dd"
}

# End-to-end latency of mode $1 at a paced rate (--latency): a fresh input
# topic whose records carry the broker's append time, the process under
# test started and joined first, then latency_tool produce paces the
# records gen.py wrote; latency_tool consume reads the output
# read_committed (and the input, for its floor); measure.py latency runs
# them.
latency_run() { # label
    local label=$1 tag=lat-$1
    local in=bench-lat-in-$1-$RUN_ID out=bench-lat-out-$1-$RUN_ID dlq=bench-lat-dlq-$1-$RUN_ID
    local group=bench-$tag-$RUN_ID dd=$WORK/store-$tag rate=$LAT_RATE expect
    # what bounds the output's delay: seqgate's batch.max_ms (exactly_once:
    # one transaction per batch), the peer's commit.interval.ms
    local interval=$BATCH_MS kv
    if [[ $label == streams ]]; then
        interval=$(sed -n 's/^commit\.interval\.ms=//p' "$PEER_DIR/streams-peer.properties")
        for kv in "${STREAMS_PROPS[@]}"; do
            [[ $kv == commit.interval.ms=* ]] && interval=${kv#*=}
        done
    fi
    if [[ $rate == 0 ]]; then
        rate=$("$PY" -c 'import json,statistics,sys
xs=[x for x in (json.loads(l) for l in open(sys.argv[1]) if l.strip())
    if x["label"] == sys.argv[2] and x.get("events_per_s")]
print(round(statistics.median(r["events_per_s"] for r in xs) / 2) if xs else 0)' \
            "$RESULTS" "$label")
        [[ $rate != 0 ]] || die "--latency: no throughput run of $label to take 50 % of (give --latency-rate N)"
    fi
    # plain copies every record; the others output the distinct events
    # (gen.py: duplicates = round(events x 0.10))
    if [[ $label == plain ]]; then expect=$LAT_EVENTS; else
        expect=$("$PY" -c "import sys; n=int(sys.argv[1]); print(n - round(n * 0.10))" "$LAT_EVENTS")
    fi
    rm -rf "$dd"
    mkdir -p "$dd"
    "$PY" "$ROOT/bench/measure.py" topics --bootstrap "$BS" \
        --config message.timestamp.type=LogAppendTime "$in:3"
    "$PY" "$ROOT/bench/measure.py" topics --bootstrap "$BS" "$out:3" "$dlq:3"
    mode_cmd "$label" "$tag" "$group" "$dd" "$out" "$dlq" "$in"
    # ready: the peer logs "running" in Kafka Streams' RUNNING state; seqgate
    # (both guarantees) a restore_done per assigned partition
    # (--ordered: the output is in aggregate order, plain's is not)
    local ready=(--ordered)
    case $label in
    streams) ready+=(--ready-event running --ready-count 1) ;;
    at_least_once | exactly_once) ready+=(--ready-event restore_done --ready-count 3) ;;
    *) ready=() ;;
    esac
    log "latency $tag: $CMD_DESC, $LAT_EVENTS events at $rate ev/s"
    "$PY" "$ROOT/bench/measure.py" latency --bootstrap "$BS" --group "$group" \
        --input "$in" --output "$out" --expect "$expect" \
        --records "$LAT_RECORDS" --rate "$rate" --tool "$LATENCY_TOOL" \
        --manifest "$WORK/$tag.producer.json" --label "$label" \
        --out "$LATENCY_RESULTS" --log "$WORK/$tag.log" --batch-ms "$interval" \
        --dump "$WORK/$tag.latencies" "${ready[@]}" -- "${CMD[@]}" >&2 || {
        log "latency $tag: FAILED (see $WORK/$tag.log)"
        LAT_FAILED=1
    }
    [[ $KEEP == 1 ]] || rm -rf "$dd"
}

# The --scale phase's input: topic $1 holds $2 priming records (one per
# extra aggregate) and then the stream; its manifest (with
# prime_end_offsets) goes to $3.
scale_input() { # topic primed manifest
    "$PY" "$ROOT/bench/measure.py" topics --bootstrap "$BS" "$1:3"
    log "scale: $2 priming records, then $EVENTS events, into $1 (not timed)"
    "$PY" "$ROOT/bench/gen.py" --bootstrap "$BS" --topic "$1" --events "$EVENTS" \
        --aggregates "$AGGREGATES" --prime "$2" \
        2> >(grep -v 'Coordinator load in progress' >&2) >"$3"
    log "scale manifest: $(cat "$3")"
}

# A --scale run of mode $1 on topic $2 (primed with $3 records): one process
# reads the priming records and then the stream; measure.py run takes the
# stream's rate from the moment the committed offsets pass the priming.
scale_run() { # label topic primed manifest
    local label=$1 topic=$2 n=$3 man=$4 tag=scale-$1-$3
    local out=bench-out-$tag-$RUN_ID dlq=bench-dlq-$tag-$RUN_ID
    local group=bench-$tag-$RUN_ID dd=$WORK/store-$tag mark
    rm -rf "$dd"
    mkdir -p "$dd"
    "$PY" "$ROOT/bench/measure.py" topics --bootstrap "$BS" "$out:3" "$dlq:3"
    mode_cmd "$label" "$tag" "$group" "$dd" "$out" "$dlq" "$topic"
    mark=$("$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["prime_end_offsets"]))' "$man")
    log "scale $tag: $CMD_DESC, $n aggregates primed, then $EVENTS events"
    "$PY" "$ROOT/bench/measure.py" run --bootstrap "$BS" --group "$group" \
        --topic "$topic" --label "scale-$label" --out "$SCALE_RESULTS" \
        --log "$WORK/$tag.log" --time-file "$WORK/$tag.time" --data-dir "$dd" \
        --mark-offsets "$mark" --poll-s 0.05 --timeout 7200 -- "${CMD[@]}" >&2
    # Correctness as in the throughput runs, over priming + stream (the
    # manifest counts both); the order check reads every record back, so
    # it runs only with the read_committed count that reads them anyway.
    local rc=()
    [[ $label == at_least_once ]] || rc=(--read-committed --verify)
    "$PY" "$ROOT/bench/measure.py" check --bootstrap "$BS" --out "$out" \
        --dlq "$dlq" --manifest "$man" --results "$SCALE_RESULTS" "${rc[@]}" >&2 || true
    # What the run left on disk: the store, and on the broker the input
    # topic and the changelog(s).
    local cl=() t
    if [[ $label == streams ]]; then
        for t in "${PEER_STORES[@]}"; do cl+=("$group-$t-changelog"); done
    else
        cl=("$group-$topic-changelog")
    fi
    scale_disk "$label" "$dd" "$n" "$topic" "${cl[@]}"
    [[ $KEEP == 1 ]] || rm -rf "$dd"
}

# What a --scale run left on disk: its store, and on the broker (allocated
# blocks under log.dirs) the input topic and the changelog(s); a line of
# scale-disk.jsonl.
scale_disk() { # label data_dir primed input changelog...
    local label=$1 dd=$2 n=$3 topic=$4 sizes
    shift 4
    sizes=$("$PY" -c 'import glob,json,os,sys
ld, dd, label, n, topic = sys.argv[1:6]
def du(pats):
    # allocated blocks: the broker preallocates index files (sparse)
    return sum(os.stat(os.path.join(r, f)).st_blocks * 512 for p in pats
               for d in glob.glob(p) for r, _, fs in os.walk(d) for f in fs) if ld else None
print(json.dumps({"label": "scale-" + label, "prime_records": int(n),
    "data_dir_bytes": sum(os.stat(os.path.join(r, f)).st_blocks * 512
                          for r, _, fs in os.walk(dd) for f in fs),
    "input_topic_bytes": du([os.path.join(ld, topic + "-*")]),
    "changelog_bytes": du([os.path.join(ld, c + "-*") for c in sys.argv[6:]])}))' \
        "$LOG_DIR" "$dd" "$label" "$n" "$topic" "$@")
    echo "$sizes" >>"$WORK/scale-disk.jsonl"
    log "scale $label $n: on disk $sizes"
}

# --- the --scale phase with a store primed through its changelog -------------

# Its input: the stream (gen.py, --events over --aggregates), then the
# probes (scale_prime probe: per probe a redelivery of a primed event and a
# stale version 1 of a primed aggregate); $2 gets the manifest the checks
# use (the stream's counts plus the probes').
scale_cl_input() { # topic manifest
    "$PY" "$ROOT/bench/measure.py" topics --bootstrap "$BS" "$1:3"
    log "scale: $EVENTS events over $AGGREGATES aggregates, then $SCALE_PROBES probes, into $1 (not timed)"
    "$PY" "$ROOT/bench/gen.py" --bootstrap "$BS" --topic "$1" --events "$EVENTS" \
        --aggregates "$AGGREGATES" 2> >(grep -v 'Coordinator load in progress' >&2) \
        >"$WORK/scale-stream.manifest.json"
    "$SCALE_PRIME_TOOL" probe -b "$BS" -t "$1" -n "$SCALE_PROBES" -A "$AGGREGATES" \
        >"$WORK/scale-probe.json"
    "$PY" -c 'import json,sys
m = json.load(open(sys.argv[1])); p = json.load(open(sys.argv[2]))
m["stream_events"] = m["events"]
m["events"] += p["records"]; m["duplicates"] += p["duplicates"]
m["dlq"] = p["dlq"]; m["dlq_reason"] = p["dlq_reason"]; m["probes"] = p["probes"]
print(json.dumps(m))' "$WORK/scale-stream.manifest.json" "$WORK/scale-probe.json" >"$2"
    log "scale manifest: $(cat "$2")"
}

# One --scale run of mode $1 with a store of $2 aggregates and $3 live
# dedup keys, primed through its changelog (scale_prime, timed, before the
# process starts), on the input topic $SCALE_IN: measure.py run takes the
# stream's rate from the end of the restore, and the system figures; the
# run is checked, its broker disk measured, its topics deleted.
scale_cl_run() { # label aggregates dedup_keys round
    local label=$1 k=$2 d=$3 tag=scale-$1-$2-$3-$4
    local out=bench-out-$tag-$RUN_ID dlq=bench-dlq-$tag-$RUN_ID
    local group=bench-$tag-$RUN_ID dd=$WORK/store-$tag
    local ready=() atr=() cls=() t
    rm -rf "$dd"
    mkdir -p "$dd"
    "$PY" "$ROOT/bench/measure.py" topics --bootstrap "$BS" "$out:3" "$dlq:3"
    mode_cmd "$label" "$tag" "$group" "$dd" "$out" "$dlq" "$SCALE_IN"
    log "scale $tag: priming $k aggregates, $d dedup keys through the changelog"
    if [[ $label == streams ]]; then
        # the peer's dedup TTL: its properties file's, or a --streams-prop
        local ttl kv
        ttl=$(sed -n 's/^peer\.dedup\.ttl\.ms=//p' "$PEER_DIR/streams-peer.properties")
        for kv in "${STREAMS_PROPS[@]}"; do
            [[ $kv == peer.dedup.ttl.ms=* ]] && ttl=${kv#*=}
        done
        "$SCALE_PRIME_TOOL" peer -b "$BS" -a "$group" -t "$SCALE_IN" -k "$k" -d "$d" \
            -A "$AGGREGATES" -T "${ttl:-604800000}" >"$WORK/$tag.prime.json" ||
            die "scale $tag: priming failed"
        ready=(--ready-event running --ready-count 1)
        for t in "${PEER_STORES[@]}"; do cls+=("$group-$t-changelog"); done
    else
        "$SCALE_PRIME_TOOL" seqgate -b "$BS" -c "$WORK/$tag.json" -t "$SCALE_IN" \
            -k "$k" -d "$d" -A "$AGGREGATES" >"$WORK/$tag.prime.json" ||
            die "scale $tag: priming failed"
        # every partition restored (3: the input's partitions)
        ready=(--ready-event restore_done --ready-count 3)
        atr=(--at-ready "'$SEQGATECTL' sizing --config '$WORK/$tag.json' --data-dir '$dd' --events-per-day 1 --json")
        cls=("$group-$SCALE_IN-changelog")
    fi
    log "scale $tag: primed $(head -c 400 "$WORK/$tag.prime.json")"
    # the priming's writes (the broker's logs: 1.3 GB at 10 M keys) on disk
    # before the process starts: left to the kernel they are written 30 s
    # later, in the large store's restore and stream and not the small's
    sync
    log "scale $tag: $CMD_DESC: restore, then the stream"
    "$PY" "$ROOT/bench/measure.py" run --bootstrap "$BS" --group "$group" \
        --topic "$SCALE_IN" --label "scale-$label" --out "$SCALE_RESULTS" \
        --log "$WORK/$tag.log" --time-file "$WORK/$tag.time" --data-dir "$dd" \
        "${ready[@]}" "${atr[@]}" --attach "prime=$WORK/$tag.prime.json" \
        --poll-s 0.05 --timeout 7200 -- "${CMD[@]}" >&2 || log "scale $tag: run FAILED (see $WORK/$tag.log)"
    local rc=()
    [[ $label == at_least_once ]] || rc=(--read-committed --verify)
    "$PY" "$ROOT/bench/measure.py" check --bootstrap "$BS" --out "$out" \
        --dlq "$dlq" --manifest "$SCALE_MANIFEST" --results "$SCALE_RESULTS" "${rc[@]}" >&2 || true
    scale_disk "$label" "$dd" "$k" "$SCALE_IN" "${cls[@]}"
    "$PY" "$ROOT/bench/measure.py" delete-topics --bootstrap "$BS" "$out" "$dlq" "${cls[@]}" >&2 || true
    [[ $KEEP == 1 ]] || rm -rf "$dd"
}

for ((r = 1; r <= WARMUP; r++)); do
    one_run warmup "$r"
done
for ((r = 1; r <= ROUNDS; r++)); do
    for m in "${MODE_LIST[@]}"; do
        one_run "$m" "$r"
    done
done
if ((RESTORE)) && [[ -n $EOS_GROUP ]]; then
    restore_runs
fi
if ((LATENCY)); then
    # the same stream for every mode, written once (not timed); the paced
    # C producer reads it
    LAT_RECORDS=$WORK/lat-input.tsv
    log "latency: writing $LAT_EVENTS events over $AGGREGATES aggregates to $LAT_RECORDS (not timed)"
    "$PY" "$ROOT/bench/gen.py" --write "$LAT_RECORDS" --events "$LAT_EVENTS" \
        --aggregates "$AGGREGATES" >"$WORK/lat-input.manifest.json"
    for m in "${MODE_LIST[@]}"; do
        latency_run "$m"
    done
fi
if ((SCALE)) && [[ $SCALE_PRIME == changelog ]]; then
    SCALE_IN=bench-scale-in-$RUN_ID
    SCALE_MANIFEST=$WORK/scale.manifest.json
    scale_cl_input "$SCALE_IN" "$SCALE_MANIFEST"
    for m in "${MODE_LIST[@]}"; do
        [[ $m == plain ]] && continue # no store to prime
        # small and large side by side (--scale-rounds times in turn), then
        # (seqgate) the many-keys store
        for ((r = 1; r <= SCALE_ROUNDS; r++)); do
            scale_cl_run "$m" "$SCALE_BASE" "$SCALE_BASE" "$r"
            scale_cl_run "$m" "$SCALE" "$SCALE" "$r"
        done
        if ((SCALE_DEDUP)) && [[ $m != streams ]]; then
            scale_cl_run "$m" "$SCALE" "$SCALE_DEDUP" 1
        fi
    done
elif ((SCALE)); then
    scale_input "bench-scale-$SCALE_BASE-$RUN_ID" "$SCALE_BASE" "$WORK/scale-$SCALE_BASE.manifest.json"
    scale_input "bench-scale-$SCALE-$RUN_ID" "$SCALE" "$WORK/scale-$SCALE.manifest.json"
    for m in "${MODE_LIST[@]}"; do
        [[ $m == plain ]] && continue # no store to prime
        for n in "$SCALE_BASE" "$SCALE"; do
            scale_run "$m" "bench-scale-$n-$RUN_ID" "$n" "$WORK/scale-$n.manifest.json"
        done
    done
fi

echo
echo "events: $EVENTS over $AGGREGATES aggregates; $ROUNDS rounds of $MODES after $WARMUP warm-up; batch.max_records=$BATCH_RECORDS batch.max_ms=$BATCH_MS"
echo "consumer props: ${CONSUMER_PROPS[*]:-(defaults)}; producer props: ${PRODUCER_PROPS[*]:-(defaults)}"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" "$ROOT/bench/measure.py" report --results "$RESULTS" \
    --changelog "$CHANGELOG_RESULTS" --restore "$RESTORE_RESULTS" \
    --latency "$LATENCY_RESULTS" --scale "$SCALE_RESULTS" \
    --scale-disk "$WORK/scale-disk.jsonl"
if ((LAT_FAILED)); then
    echo "LATENCY RUN FAILED: not started, output records missing or output timestamps not the input's (see above)"
    exit 1
fi
if grep -q '"ok": false' "$RESULTS.check" "$SCALE_RESULTS.check" 2>/dev/null; then
    echo "CORRECTNESS MISMATCH in a seqgate or streams run (see above)"
    exit 1
fi
