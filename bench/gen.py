#!/usr/bin/env python3
"""bench/gen.py — writes the benchmark's input stream to a Kafka topic.

The stream is N CloudEvents in Kafka binary content mode (CloudEvents Kafka
protocol binding §3.2: attributes as ``ce_*`` headers, the value is the event
data) over A aggregates:

* record key = aggregate id (``order-000042``), so every event of an
  aggregate lands in one partition (the producer's key partitioner);
* headers ``ce_specversion`` (1.0), ``ce_id`` (unique per event),
  ``ce_source`` (``/bench/orders``), ``ce_type`` (``order.created`` for
  version 1, ``order.closed`` for an aggregate's last version,
  ``order.updated`` in between) and ``ce_sequence`` (the version, decimal);
* value = a JSON object of about 200 bytes.

Abnormal traffic, as the seed describes it:

* ``--dup-rate`` (default 0.10) of the N records are identical redeliveries
  (same key, headers and value) of an earlier record, placed 1..``--dup-window``
  records after the original — what a producer retry or an at-least-once
  redelivery looks like. So N*dup_rate records are duplicates and
  N - N*dup_rate are distinct events.
* ``--reorder-rate`` (default 0.05) of the distinct events arrive before
  their predecessor: the positions of versions v and v+1 of one aggregate are
  swapped (non-overlapping swaps), the "v10/v11 swapped" case.

Aggregates are interleaved the way live orders are: a window of
``--active`` aggregates is open at a time; each next event belongs to a random
open aggregate; a finished aggregate is replaced by a new one. That keeps
swapped versions close together ("locally reordered") and bounded in time.

The generator is deterministic for a given ``--seed``. It prints one JSON
line (the manifest) on stdout with the exact counts the benchmark checks
seqgate's output against. Generation time is not part of any measurement.

Two options serve bench/run.sh's extra phases:

* ``--prime N`` (the ``--scale`` phase): before the stream, N priming
  records, one per aggregate that the stream never uses: version 1,
  ``order.created``, key ``order-AAAAAA.BBBBB`` (so the stream's keys
  ``order-AAAAAA`` fall evenly between them in the store's key order), in a
  pseudo-random order. They are produced and flushed first; the manifest's
  ``prime_end_offsets`` (partition → offset) is where the stream begins, and
  its ``events``, ``distinct_events`` and ``aggregates`` count the priming
  records too (``stream_*``: the stream alone).
* ``--rate R`` (a paced Python producer; bench/run.sh's ``--latency``
  phase uses ``--write`` instead): the stream is produced at R
  records/s (paced in 1 ms steps, ``linger.ms`` 1 so that records reach the
  broker as produced); the manifest says the rate achieved. ``--shard I/K``
  makes it one of K such producers side by side (aggregates a % K == I, at
  R / K each), for rates one Python producer cannot reach. Latency is
  measured from the broker's append time (the input topic has
  ``message.timestamp.type=LogAppendTime``), so the producer's own delay
  does not count.
* ``--write FILE`` (the ``--latency`` phase): the stream is written to FILE
  instead of a topic, one record a line (key TAB value, then TAB
  name=value per header: ``record_line``), for ``bench/latency_tool
  produce``, the paced producer in C. No broker is needed.
"""
import argparse
import json
import random
import sys
import time

from confluent_kafka import Producer


def build_stream(events, aggregates, dup_rate, reorder_rate, active,
                 dup_window, seed):
    """Returns (records, manifest). records: list of (agg, version, n_agg)."""
    rnd = random.Random(seed)
    dups = round(events * dup_rate)
    distinct = events - dups
    if aggregates < 1 or distinct < aggregates:
        raise SystemExit("gen.py: need at least one distinct event per aggregate "
                         f"(events={events}, duplicates={dups}, aggregates={aggregates})")
    base, extra = divmod(distinct, aggregates)
    length = [base + (1 if a < extra else 0) for a in range(aggregates)]

    # Interleave: `active` open aggregates, each emits its versions in order.
    stream = []
    open_aggs = list(range(min(active, aggregates)))
    nxt = len(open_aggs)
    ver = [0] * aggregates
    while open_aggs:
        i = rnd.randrange(len(open_aggs))
        a = open_aggs[i]
        ver[a] += 1
        stream.append((a, ver[a]))
        if ver[a] == length[a]:
            if nxt < aggregates:
                open_aggs[i] = nxt
                nxt += 1
            else:
                open_aggs[i] = open_aggs[-1]
                open_aggs.pop()
    assert len(stream) == distinct

    # Local reordering: swap the positions of v and v+1 of one aggregate.
    pos = {ev: i for i, ev in enumerate(stream)}
    want_swaps = round(distinct * reorder_rate)
    used = set()
    swaps = 0
    candidates = [(a, v) for a in range(aggregates) for v in range(1, length[a])]
    rnd.shuffle(candidates)
    for a, v in candidates:
        if swaps == want_swaps:
            break
        if (a, v) in used or (a, v + 1) in used:
            continue
        used.add((a, v))
        used.add((a, v + 1))
        i, j = pos[(a, v)], pos[(a, v + 1)]
        stream[i], stream[j] = stream[j], stream[i]
        swaps += 1
    if swaps < want_swaps:
        raise SystemExit(f"gen.py: only {swaps} of {want_swaps} swaps possible; "
                         "use more events per aggregate or a lower --reorder-rate")
    del pos, used, candidates

    # Duplicates: `dups` distinct events, each redelivered once, 1..dup_window
    # records after the original.
    order = [(float(i), i) for i in range(distinct)]
    for i in rnd.sample(range(distinct), dups):
        order.append((i + rnd.randint(1, dup_window) + 0.5, i))
    order.sort()
    records = [(stream[i][0], stream[i][1], length[stream[i][0]]) for _, i in order]

    manifest = {
        "events": events,
        "aggregates": aggregates,
        "distinct_events": distinct,
        "duplicates": dups,
        "reordered_events": swaps,
        "seed": seed,
        "active_aggregates": active,
        "dup_window": dup_window,
    }
    return records, manifest


PAD = "x" * 64


def prime_records(n, aggregates):
    """The --prime records: (key suffix, ...) for n aggregates the stream
    does not use. Record j of the output order is priming aggregate
    (j * step) mod n, step coprime with n: a fixed pseudo-random order
    (inserting in key order would fill the store's B-tree pages unlike
    live traffic does); step ~ 0.618 n (the golden ratio's), so that
    consecutive records land far apart in key order. Aggregate i's key is order-{i % A:06d}.{i // A:05d}
    for A = the stream's aggregates: between order-{i % A} and its
    successor, so the stream's aggregates fall evenly among the primed
    ones."""
    step = max(1, int(n * 0.6180339887))
    while n > 1 and _gcd(step, n) != 1:
        step += 1
    for j in range(n):
        i = (j * step) % n
        yield f"{i % aggregates:06d}.{i // aggregates:05d}"


def shard_of(records, shard, shards):
    """The records of --shard SHARD/SHARDS: those of the aggregates a with
    a % SHARDS == SHARD. Every record of an aggregate (its duplicates and
    swaps included) stays in one shard, so each aggregate's order is the
    stream's."""
    return [r for r in records if r[0] % shards == shard]


def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


def value_of(a, v, n):
    """The event data: a ~200-byte JSON object, the bytes json.dumps(...,
    separators=(",", ":")) makes of {"orderId", "version", "customerId",
    "amountCents", "currency", "status", "note"}, formatted directly (7x
    faster, so that a paced --rate run is not limited by it)."""
    st = "created" if v == 1 else ("closed" if v == n else "updated")
    return (f'{{"orderId":"order-{a:06d}","version":{v},'
            f'"customerId":"cust-{(a * 7919) % 100000:05d}",'
            f'"amountCents":{(a * 31 + v * 17) % 100000},"currency":"EUR",'
            f'"status":"{st}","note":"{PAD}"}}').encode()


SOURCE = b"/bench/orders"


def record_of(a, v, n):
    """The stream's record for version v of aggregate a (of n versions):
    (key, value, headers), as produced to the input topic."""
    typ = b"order.created" if v == 1 else (b"order.closed" if v == n else b"order.updated")
    headers = [
        ("ce_specversion", b"1.0"),
        ("ce_id", f"evt-{a:06d}-{v:05d}".encode()),
        ("ce_source", SOURCE),
        ("ce_type", typ),
        ("ce_sequence", str(v).encode()),
        ("content-type", b"application/json"),
    ]
    return f"order-{a:06d}".encode(), value_of(a, v, n), headers


def record_line(key, value, headers):
    """One record of a --write file: key TAB value (TAB name=value)* LF,
    the format bench/latency_tool.c's producer reads. No part may hold a
    TAB or LF, nor a header name an '='."""
    parts = [key, value] + [k.encode() + b"=" + v for k, v in headers]
    for x in parts:
        if b"\t" in x or b"\n" in x:
            raise ValueError(f"gen.py: a TAB or LF in {x!r}")
    for k, _ in headers:
        if "=" in k:
            raise ValueError(f"gen.py: an '=' in header name {k!r}")
    return b"\t".join(parts) + b"\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--topic")
    ap.add_argument("--write", metavar="FILE",
                    help="write the stream to FILE (one record a line: key TAB value "
                         "TAB name=value ...) instead of producing it; for "
                         "bench/latency_tool produce")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--aggregates", type=int, default=100_000)
    ap.add_argument("--dup-rate", type=float, default=0.10)
    ap.add_argument("--reorder-rate", type=float, default=0.05)
    ap.add_argument("--active", type=int, default=1000,
                    help="aggregates open at a time (default 1000)")
    ap.add_argument("--dup-window", type=int, default=2000,
                    help="a redelivery comes 1..N records after the original")
    ap.add_argument("--seed", type=int, default=20260101)
    ap.add_argument("--prime", type=int, default=0, metavar="N",
                    help="N priming records (one per extra aggregate) first")
    ap.add_argument("--rate", type=float, default=0,
                    help="produce the stream at this many records/s (0: as fast as possible)")
    ap.add_argument("--shard", default="0/1", metavar="I/K",
                    help="produce only the aggregates a with a %% K == I, at --rate / K "
                         "(K paced producers side by side; default 0/1: all)")
    args = ap.parse_args()
    shard, shards = (int(x) for x in args.shard.split("/"))
    if not 0 <= shard < shards:
        ap.error("--shard I/K needs 0 <= I < K")
    if not args.write and not (args.bootstrap and args.topic):
        ap.error("--bootstrap and --topic are required (unless --write)")
    if args.write and (args.prime or args.rate):
        ap.error("--write takes neither --prime nor --rate")

    t0 = time.monotonic()
    records, manifest = build_stream(args.events, args.aggregates, args.dup_rate,
                                     args.reorder_rate, args.active,
                                     args.dup_window, args.seed)
    if shards > 1:
        records = shard_of(records, shard, shards)
    rate = args.rate / shards
    t_build = time.monotonic() - t0

    if args.write:
        # The paced C producer's input (bench/latency_tool produce): the
        # same records, written instead of produced.
        with open(args.write, "wb") as f:
            for a, v, n in records:
                f.write(record_line(*record_of(a, v, n)))
        manifest["file"] = args.write
        manifest["records"] = len(records)
        manifest["build_s"] = round(t_build, 2)
        print(json.dumps(manifest), flush=True)
        return

    # Idempotent producer: retries never reorder or duplicate within a
    # partition, so the topic holds exactly the stream built above.
    p = Producer({
        "bootstrap.servers": args.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 1 if args.rate else 50,
        "batch.num.messages": 10000,
        "batch.size": 1048576,
        "queue.buffering.max.messages": 1000000,
        "queue.buffering.max.kbytes": 1048576,
        "compression.type": "none",
    })
    failed = []
    prime_end = {}

    def on_delivery(err, msg):
        if err is not None:
            failed.append(str(err))

    def on_prime(err, msg):
        if err is not None:
            failed.append(str(err))
        elif msg.offset() + 1 > prime_end.get(msg.partition(), 0):
            prime_end[msg.partition()] = msg.offset() + 1

    def produce(key, value, headers, cb):
        while True:
            try:
                p.produce(args.topic, key=key, value=value, headers=headers,
                          on_delivery=cb)
                return
            except BufferError:
                p.poll(0.05)

    src = SOURCE
    if args.prime:
        t_p = time.monotonic()
        pv = value_of(0, 1, 9)
        for sfx in prime_records(args.prime, args.aggregates):
            produce(f"order-{sfx}".encode(), pv, [
                ("ce_specversion", b"1.0"),
                ("ce_id", f"evt-{sfx}-00001".encode()),
                ("ce_source", src),
                ("ce_type", b"order.created"),
                ("ce_sequence", b"1"),
                ("content-type", b"application/json"),
            ], on_prime)
            p.poll(0)
        if p.flush(300) or failed:
            sys.exit(f"gen.py: priming records undelivered or failed ({failed[:1]})")
        # The manifest counts the whole topic (what a run's checks compare
        # with): the priming records are distinct events of aggregates of
        # their own; stream_* count the stream alone.
        for k in ("events", "distinct_events", "aggregates"):
            manifest["stream_" + k] = manifest[k]
            manifest[k] += args.prime
        manifest["prime_records"] = args.prime
        manifest["prime_end_offsets"] = {str(k): v for k, v in sorted(prime_end.items())}
        manifest["prime_produce_s"] = round(time.monotonic() - t_p, 2)
    t_s = time.monotonic()
    for i, (a, v, n) in enumerate(records):
        if rate:
            # pace: record i is due at t_s + i / rate
            ahead = t_s + i / rate - time.monotonic()
            if ahead > 0.001:
                p.poll(0)
                time.sleep(ahead)
        key, value, headers = record_of(a, v, n)
        produce(key, value, headers, on_delivery)
        p.poll(0)
    t_sent = time.monotonic() - t_s
    left = p.flush(120)
    if left or failed:
        sys.exit(f"gen.py: {left} records undelivered, {len(failed)} failed "
                 f"(first: {failed[:1]})")
    manifest["topic"] = args.topic
    manifest["build_s"] = round(t_build, 2)
    manifest["produce_s"] = round(time.monotonic() - t_s, 2)
    if shards > 1:
        manifest["shard"] = args.shard
        manifest["shard_records"] = len(records)
    if rate:
        manifest["rate_wanted"] = rate
        manifest["rate_achieved"] = round(len(records) / t_sent) if t_sent > 0 else None
    print(json.dumps(manifest), flush=True)


if __name__ == "__main__":
    main()
