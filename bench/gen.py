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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--aggregates", type=int, default=100_000)
    ap.add_argument("--dup-rate", type=float, default=0.10)
    ap.add_argument("--reorder-rate", type=float, default=0.05)
    ap.add_argument("--active", type=int, default=1000,
                    help="aggregates open at a time (default 1000)")
    ap.add_argument("--dup-window", type=int, default=2000,
                    help="a redelivery comes 1..N records after the original")
    ap.add_argument("--seed", type=int, default=20260101)
    args = ap.parse_args()

    t0 = time.monotonic()
    records, manifest = build_stream(args.events, args.aggregates, args.dup_rate,
                                     args.reorder_rate, args.active,
                                     args.dup_window, args.seed)
    t_build = time.monotonic() - t0

    # Idempotent producer: retries never reorder or duplicate within a
    # partition, so the topic holds exactly the stream built above.
    p = Producer({
        "bootstrap.servers": args.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 50,
        "batch.num.messages": 10000,
        "batch.size": 1048576,
        "queue.buffering.max.messages": 1000000,
        "queue.buffering.max.kbytes": 1048576,
        "compression.type": "none",
    })
    failed = []

    def on_delivery(err, msg):
        if err is not None:
            failed.append(str(err))

    src = b"/bench/orders"
    for a, v, n in records:
        typ = b"order.created" if v == 1 else (b"order.closed" if v == n else b"order.updated")
        headers = [
            ("ce_specversion", b"1.0"),
            ("ce_id", f"evt-{a:06d}-{v:05d}".encode()),
            ("ce_source", src),
            ("ce_type", typ),
            ("ce_sequence", str(v).encode()),
            ("content-type", b"application/json"),
        ]
        while True:
            try:
                p.produce(args.topic, key=f"order-{a:06d}".encode(),
                          value=value_of(a, v, n), headers=headers,
                          on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(120)
    if left or failed:
        sys.exit(f"gen.py: {left} records undelivered, {len(failed)} failed "
                 f"(first: {failed[:1]})")
    manifest["topic"] = args.topic
    manifest["build_s"] = round(t_build, 2)
    manifest["produce_s"] = round(time.monotonic() - t0 - t_build, 2)
    print(json.dumps(manifest), flush=True)


if __name__ == "__main__":
    main()
