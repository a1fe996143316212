#!/usr/bin/env python3
"""Chaos-suite stream generator and its independent model of the result.

`generate(seed, ...)` builds a known input stream for one input topic of
`partitions` partitions (CloudEvents binary mode: key = aggregate id,
ce_sequence = version, ce_type from the order state machine below) holding
every abnormal case of semantics §3/§4 that the result of which does not
depend on timing:

  - identical redeliveries (same ce_id, same value)            -> duplicate
  - adjacent versions swapped (v+1 before v)                    -> parked, drained
  - gaps that fill later (v+1..v+d before v, a few records on)  -> parked, drained
  - gaps that never fill (v1, v3, v4 and nothing else for the
    aggregate)                                                  -> v3, v4 DLQ
                                                                   gap_timeout
  - same ce_id, different value                                 -> DLQ
                                                                   idempotency_conflict
  - illegal transitions / unknown types (L advances)            -> DLQ illegal_transition
                                                                   / unknown_event_type
  - a new id with an old version after the aggregate moved on  -> DLQ stale_version
  - malformed records (bad ce_sequence, no ce_id)               -> DLQ malformed

It also computes the exact expected result with a small model of the
decision table (semantics §3 rows 1-8, strict ordering, gap policy `dlq`),
written here from the specification and not from seqgate's code: per
aggregate, the applied events in order; the DLQ as a multiset of
(tag, reason); and the fate of every input record. Every record's value is a
JSON object whose "tag" names it uniquely (identical redeliveries share the
tag of their original, a conflicting copy has its own), so the checker finds
each record in the output and the DLQ whatever headers seqgate adds.

Gaps that fill close within a few records of the same partition (the active
window below), far less than any gap_timeout the runner uses, and gaps that
never fill get no later event at all; so the only timing-dependent verdict,
gap_timeout, is decided by the stream alone.

CLI: `gen.py --bootstrap HOST:PORT --topic T --seed N --out expected.json`
produces the stream to an existing topic and writes the expectation file.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter, defaultdict

SOURCE = "urn:example:chaos"
FIRST_VERSION = 1

# The order state machine of the seed, plus a self-transition in CREATED so
# that aggregates can be long enough for the ordering checks to matter.
STATE_MACHINE = {
    "initial": "NEW",
    "states": ["NEW", "CREATED", "PAID", "SHIPPED", "COMPLETED", "CANCELLED",
               "RETURNING"],
    "transitions": [
        {"type": "order.created", "from": ["NEW"], "to": "CREATED"},
        {"type": "order.item_added", "from": ["CREATED"], "to": "CREATED"},
        {"type": "order.paid", "from": ["CREATED"], "to": "PAID"},
        {"type": "order.shipped", "from": ["PAID"], "to": "SHIPPED"},
        {"type": "order.completed", "from": ["SHIPPED"], "to": "COMPLETED"},
        {"type": "order.cancelled", "from": ["CREATED", "RETURNING"],
         "to": "CANCELLED"},
        {"type": "order.returning", "from": ["SHIPPED"], "to": "RETURNING"},
    ],
}
KNOWN_TYPES = sorted({t["type"] for t in STATE_MACHINE["transitions"]})
UNKNOWN_TYPE = "order.teleported"


def next_state(state: str, etype: str) -> str | None:
    """The state after `etype` from `state`, None when not a legal transition."""
    for t in STATE_MACHINE["transitions"]:
        if t["type"] == etype and state in t["from"]:
            return t["to"]
    return None


# ---------------------------------------------------------------------------
# stream construction

def _value(tag: str, agg: str, v, etype: str, extra: dict | None = None) -> str:
    obj = {"tag": tag, "aggregate": agg, "version": v, "type": etype}
    if extra:
        obj.update(extra)
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _record(p: int, agg: str, v: int, etype: str, eid: str, tag: str,
            value: str, kind: str) -> dict:
    return {"partition": p, "key": agg, "value": value,
            "headers": [["ce_specversion", "1.0"], ["ce_id", eid],
                        ["ce_source", SOURCE], ["ce_type", etype],
                        ["ce_sequence", str(v)]],
            "tag": tag, "eid": eid, "agg": agg, "v": v, "kind": kind}


def _aggregate_events(rng: random.Random, p: int, agg: str, never_fill: bool,
                      rates: dict) -> list[dict]:
    """One aggregate's records in the order it sends them (before the
    partition-level interleaving)."""
    if never_fill:
        # v1, v3, v4: v2 never comes; v3 and v4 time out, the aggregate is
        # quarantined. Nothing else is ever sent for it.
        seq = [(1, "order.created"), (3, "order.paid"), (4, "order.shipped")]
        return [_record(p, agg, v, t, f"{agg}-v{v}", f"{agg}-v{v}",
                        _value(f"{agg}-v{v}", agg, v, t), "event")
                for v, t in seq]

    # Legal life cycle: created, k x item_added, then an ending.
    types = ["order.created"] + ["order.item_added"] * rng.randint(0, 8)
    types += rng.choice([["order.paid", "order.shipped", "order.completed"],
                         ["order.cancelled"],
                         ["order.paid", "order.shipped", "order.returning",
                          "order.cancelled"],
                         ["order.paid"], []])
    # Insert illegal / unknown events: they take a version, change no state.
    out_types = []
    state = "NEW"
    for t in types:
        if out_types and rng.random() < rates["illegal"]:
            bad = [x for x in KNOWN_TYPES if next_state(state, x) is None]
            out_types.append(rng.choice(bad))
        if out_types and rng.random() < rates["unknown"]:
            out_types.append(UNKNOWN_TYPE)
        out_types.append(t)
        state = next_state(state, t) or state
    recs = []
    for i, t in enumerate(out_types):
        v = FIRST_VERSION + i
        eid = f"{agg}-v{v}"
        recs.append(_record(p, agg, v, t, eid, eid,
                            _value(eid, agg, v, t, {"amount": rng.randint(1, 999)}),
                            "event"))
    n = len(recs)

    # Gaps that fill later: move version v behind the next d versions.
    i = 0
    while i < n - 1:
        if rng.random() < rates["late_fill"]:
            d = rng.randint(1, min(3, n - 1 - i))
            recs.insert(i + d, recs.pop(i))
            i += d + 1
        elif rng.random() < rates["swap"]:
            recs[i], recs[i + 1] = recs[i + 1], recs[i]
            i += 2
        else:
            i += 1

    # Stale: a new id carrying an old version after the aggregate moved on.
    if rng.random() < rates["stale"]:
        v = rng.randint(FIRST_VERSION, FIRST_VERSION + n - 1)
        eid = f"{agg}-stale-v{v}"
        recs.append(_record(p, agg, v, "order.item_added", eid, eid,
                            _value(eid, agg, v, "order.item_added"), "stale"))

    # Identical redeliveries and conflicting copies, a few records later.
    final = list(recs)
    for r in recs:
        if rng.random() < rates["dup"]:
            pos = final.index(r) + rng.randint(1, 4)
            final.insert(min(pos, len(final)), dict(r, kind="duplicate"))
        if r["kind"] == "event" and rng.random() < rates["conflict"]:
            pos = final.index(r) + rng.randint(1, 4)
            tag = r["eid"] + "#conflict"
            c = _record(p, agg, r["v"], r["headers"][3][1], r["eid"], tag,
                        _value(tag, agg, r["v"], r["headers"][3][1],
                               {"amount": -1}), "conflict")
            final.insert(min(pos, len(final)), c)
    return final


MALFORMED_VARIANTS = [
    ("ce_sequence", "+7"),        # leading sign (semantics §2)
    ("ce_sequence", "7x"),        # non-digit
    ("ce_sequence", " 7"),        # space
    ("ce_sequence", "18446744073709551616"),  # 2^64: overflow
    ("ce_id", None),              # required attribute missing
]


def _malformed(p: int, agg: str, n: int, variant: int) -> dict:
    tag = f"malformed-{p}-{n}"
    r = _record(p, agg, 7, "order.item_added", tag, tag,
                _value(tag, agg, 7, "order.item_added"), "malformed")
    name, val = MALFORMED_VARIANTS[variant % len(MALFORMED_VARIANTS)]
    hdrs = [h for h in r["headers"] if h[0] != name]
    if val is not None:
        hdrs.append([name, val])
    r["headers"] = hdrs
    return r


def generate(seed: int, partitions: int = 6, aggregates: int = 1800,
             never_fill_share: float = 0.02, window: int = 6,
             malformed_rate: float = 0.004) -> dict:
    """The stream and its expected result, deterministic in `seed`.

    Returns {"seed", "partitions", "records": [record...] in produce order
    per partition (interleaved across partitions), "expected": {...}}.
    """
    rng = random.Random(seed)
    rates = {"illegal": 0.04, "unknown": 0.01, "late_fill": 0.05,
             "swap": 0.06, "stale": 0.08, "dup": 0.08, "conflict": 0.02}
    per_part: dict[int, list[dict]] = {}
    n_never = 0
    for p in range(partitions):
        aggs = [f"order-{i:05d}" for i in range(aggregates) if i % partitions == p]
        # Gaps that never fill go early in the partition, so that they time
        # out while the run is still busy, not after it.
        nf = set(rng.sample(aggs[:max(1, len(aggs) // 3)],
                            max(1, int(len(aggs) * never_fill_share))))
        n_never += len(nf)
        plans = {a: _aggregate_events(rng, p, a, a in nf, rates) for a in aggs}
        # Interleave with a small active window: each aggregate's records
        # stay within a few dozen records of each other in the partition.
        pending = list(aggs)
        active: list[str] = []
        idx: dict[str, int] = {}
        seq: list[dict] = []
        while pending or active:
            while pending and len(active) < window:
                a = pending.pop(0)
                active.append(a)
                idx[a] = 0
            a = rng.choice(active)
            seq.append(plans[a][idx[a]])
            idx[a] += 1
            if idx[a] == len(plans[a]):
                active.remove(a)
            if rng.random() < malformed_rate:
                seq.append(_malformed(p, a, len(seq), rng.randrange(1 << 16)))
        per_part[p] = seq

    records: list[dict] = []
    pos = {p: 0 for p in per_part}
    while pos:
        p = rng.choice(sorted(pos))
        take = rng.randint(1, 20)
        records.extend(per_part[p][pos[p]:pos[p] + take])
        pos[p] += take
        if pos[p] >= len(per_part[p]):
            del pos[p]

    expected = model(per_part)
    expected["never_fill_aggregates"] = n_never
    return {"seed": seed, "partitions": partitions, "source": SOURCE,
            "records": records, "expected": expected}


# ---------------------------------------------------------------------------
# the model (semantics §3 rows 1-8, §4 gap policy dlq)

class _Agg:
    __slots__ = ("last", "state", "quarantined", "parked")

    def __init__(self):
        self.last = None        # L
        self.state = STATE_MACHINE["initial"]
        self.quarantined = False
        self.parked: dict[int, dict] = {}


def model(per_part: dict[int, list[dict]]) -> dict:
    """Runs the decision table over each partition in order; at the end every
    event still parked times out (gap policy dlq). Returns the expectation."""
    applied: dict[str, list[list]] = defaultdict(list)
    dlq: list[list[str]] = []
    fate: dict[str, str] = {}          # tag -> applied | dlq:<reason> | duplicate
    drops: Counter = Counter()
    park_span: list[int] = []          # records between park and release
    for p, seq in per_part.items():
        aggs: dict[str, _Agg] = defaultdict(_Agg)
        keys: dict[str, str] = {}      # scope+id -> value (digest stand-in)
        parked_at: dict[tuple, int] = {}

        def to_dlq(r, reason):
            dlq.append([r["tag"], reason])
            fate.setdefault(r["tag"], "dlq:" + reason)

        def in_order(a: _Agg, r: dict, pos: int):
            """Rows 4, 6, 7 for a record with v == L+1 (or F, new)."""
            nxt = next_state(a.state, r["headers"][3][1])
            a.last = r["v"]
            if r["headers"][3][1] not in KNOWN_TYPES:
                to_dlq(r, "unknown_event_type")
            elif nxt is None:
                to_dlq(r, "illegal_transition")
            else:
                a.state = nxt
                applied[r["agg"]].append([r["v"], r["eid"], r["tag"]])
                fate.setdefault(r["tag"], "applied")

        for pos, r in enumerate(seq):
            if r["kind"] == "malformed":                      # row 1
                to_dlq(r, "malformed")
                continue
            key = SOURCE + "\0" + r["eid"]
            if key in keys:                                   # rows 2, 3
                if keys[key] == r["value"]:
                    drops["duplicate"] += 1
                    continue
                to_dlq(r, "idempotency_conflict")
                continue
            keys[key] = r["value"]
            a = aggs[r["agg"]]
            v = r["v"]
            if a.quarantined:                                 # row 4
                to_dlq(r, "aggregate_quarantined")
                continue
            expect = FIRST_VERSION if a.last is None else a.last + 1
            if v < expect:                                    # row 5
                to_dlq(r, "stale_version")
                continue
            if v > expect:                                    # row 8
                a.parked[v] = r
                parked_at[(r["agg"], v)] = pos
                continue
            in_order(a, r, pos)                               # rows 6, 7
            while a.last + 1 in a.parked:                     # drain
                nr = a.parked.pop(a.last + 1)
                park_span.append(pos - parked_at.pop((nr["agg"], nr["v"])))
                in_order(a, nr, pos)
        for agg, a in sorted(aggs.items()):                   # §4 gap timeout
            for v in sorted(a.parked):
                to_dlq(a.parked[v], "gap_timeout")
            if a.parked:
                a.quarantined = True
    reasons = Counter(reason for _t, reason in dlq)
    return {"applied": dict(applied), "dlq": dlq, "fate": fate,
            "duplicates_dropped": drops["duplicate"],
            "dlq_by_reason": dict(sorted(reasons.items())),
            "max_park_span_records": max(park_span) if park_span else 0}


# ---------------------------------------------------------------------------
# producing

def producer(bootstrap: str):
    """An idempotent producer (acks=all): a retry across a broker restart
    neither duplicates nor reorders the generator's own records."""
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                     "acks": "all", "linger.ms": 5,
                     "message.timeout.ms": 120000,
                     # the broker restart is planned: no line per reconnect
                     "log_level": 2})


def produce(prod, topic: str, records: list[dict], timeout_s: float = 120.0) -> None:
    """Produces `records` to their partitions in order and waits for every
    delivery; raises RuntimeError on any delivery error."""
    errors: list[str] = []

    def cb(err, _msg):
        if err is not None:
            errors.append(str(err))

    for r in records:
        while True:
            try:
                prod.produce(topic, key=r["key"].encode(), value=r["value"].encode(),
                             partition=r["partition"],
                             headers=[(k, v.encode()) for k, v in r["headers"]],
                             on_delivery=cb)
                break
            except BufferError:
                prod.poll(0.1)
    left = prod.flush(timeout_s)
    if errors:
        raise RuntimeError(f"generator delivery failed: {errors[:3]}")
    if left:
        raise RuntimeError(f"generator: {left} records undelivered after {timeout_s}s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", help="produce to this cluster (else only --out)")
    ap.add_argument("--topic", default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--aggregates", type=int, default=1800)
    ap.add_argument("--out", required=True, help="expected-result JSON file")
    a = ap.parse_args(argv)
    g = generate(a.seed, a.partitions, a.aggregates)
    with open(a.out, "w") as f:
        json.dump(g, f)
    if a.bootstrap:
        if not a.topic:
            ap.error("--topic is required with --bootstrap")
        prod = producer(a.bootstrap)
        produce(prod, a.topic, g["records"])
    e = g["expected"]
    print(f"gen: seed={a.seed} records={len(g['records'])} "
          f"applied={sum(len(v) for v in e['applied'].values())} "
          f"dlq={len(e['dlq'])} {e['dlq_by_reason']} "
          f"duplicates={e['duplicates_dropped']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
