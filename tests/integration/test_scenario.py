"""The demo scenario against a real broker, with exact expected output and DLQ.

Orders are CloudEvents in binary mode (ce_* headers, key = order id,
ce_sequence = version) through the seed's order state machine, gap_timeout_ms
3000 with gap_policy dlq (semantics §3, §4). Every input record below carries
the verdict the decision table (semantics §3) gives it, with the row that
decides it; the test derives from those annotations the exact output (per
order, in version order, each record traced back to its input record by
`__seqgate.source`), the exact DLQ contents (key, ce_id, reason, original
position) and the final counters of the stats line, then checks seqgate's
real output for equality: nothing missing, nothing extra.

The stream, per order (input partition in brackets):
  order-a [0]  1 2 2(retry) 3 4 4(retry) | v5 order.created after COMPLETED
               (illegal) | v3 again with a new ce_id (stale)
  order-e [0]  1 3 4 (v2 missing: both park; after 3 s they go to the DLQ
               gap_timeout and the order is quarantined) ... later v2 arrives
               → aggregate_quarantined
  order-b [1]  1 3 2 (v3 before v2: parked, then drained) | ce_id of v2 again
               with another payload (idempotency conflict) | 4 | retry of v3
  order-m [1]  ce_sequence "abc" (malformed) | a valid v1
  order-c [2]  1 2 3 | v4 of an unknown type, and its retry | 5 | 7 (parks),
               retry of 7 (duplicate of a parked event) | 6 illegal from
               RETURNING (DLQ, but it owns v6, so v7 drains)
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timezone
from collections import Counter, defaultdict

from kafkautil import consume_all, create_topics, end_offsets, produce, unique_name
from seqgate_proc import ORDER_STATE_MACHINE, Seqgate, make_config, wait_until

SOURCE = "urn:example:shop"
GAP_TIMEOUT_MS = 3000

# Verdicts (semantics §3).
OUT = "out"            # row 6: applied (possibly after being parked, row 8)
DUP = "dup"            # row 2: dropped, nothing emitted


def dlq(reason: str) -> tuple[str, str]:
    return ("dlq", reason)


def ce(order: str, seq, typ: str, ce_id: str, partition: int, expect,
       parks: bool = False, amount: int = 10, note: str = "") -> dict:
    """One binary-mode CloudEvent plus the test's expectation for it."""
    value = json.dumps({"order": order, "type": typ, "amount": amount,
                        "note": note}, sort_keys=True).encode()
    return {
        "key": order.encode(),
        "value": value,
        "headers": [("ce_specversion", b"1.0"), ("ce_id", ce_id.encode()),
                    ("ce_source", SOURCE.encode()), ("ce_type", typ.encode()),
                    ("ce_sequence", str(seq).encode()),
                    ("content-type", b"application/json")],
        "partition": partition,
        # test-only fields (not produced)
        "_order": order, "_seq": seq, "_id": ce_id, "_expect": expect,
        "_parks": parks,
    }


def retry(rec: dict, expect=DUP) -> dict:
    """An identical redelivery of `rec` (same ce_id, same bytes)."""
    r = dict(rec)
    r["_expect"] = expect
    r["_parks"] = False
    return r


def phase1() -> list[dict]:
    a1 = ce("order-a", 1, "order.created", "a-1", 0, OUT)
    e1 = ce("order-e", 1, "order.created", "e-1", 0, OUT)
    a2 = ce("order-a", 2, "order.paid", "a-2", 0, OUT)
    e3 = ce("order-e", 3, "order.shipped", "e-3", 0, dlq("gap_timeout"), parks=True)
    a3 = ce("order-a", 3, "order.shipped", "a-3", 0, OUT)
    e4 = ce("order-e", 4, "order.completed", "e-4", 0, dlq("gap_timeout"), parks=True)
    a4 = ce("order-a", 4, "order.completed", "a-4", 0, OUT)
    a5 = ce("order-a", 5, "order.created", "a-5", 0, dlq("illegal_transition"))
    a3_late = ce("order-a", 3, "order.paid", "a-3-late", 0, dlq("stale_version"))

    b1 = ce("order-b", 1, "order.created", "b-1", 1, OUT)
    m_bad = ce("order-m", "abc", "order.created", "m-1-bad", 1, dlq("malformed"))
    b3 = ce("order-b", 3, "order.shipped", "b-3", 1, OUT, parks=True)
    m1 = ce("order-m", 1, "order.created", "m-1", 1, OUT)
    b2 = ce("order-b", 2, "order.paid", "b-2", 1, OUT, amount=10)
    b2_conflict = ce("order-b", 2, "order.paid", "b-2", 1,
                     dlq("idempotency_conflict"), amount=99)
    b4 = ce("order-b", 4, "order.completed", "b-4", 1, OUT)

    c1 = ce("order-c", 1, "order.created", "c-1", 2, OUT)
    c2 = ce("order-c", 2, "order.paid", "c-2", 2, OUT)
    c3 = ce("order-c", 3, "order.shipped", "c-3", 2, OUT)
    c4 = ce("order-c", 4, "order.refunded", "c-4", 2, dlq("unknown_event_type"))
    c5 = ce("order-c", 5, "order.returning", "c-5", 2, OUT)
    c7 = ce("order-c", 7, "order.cancelled", "c-7", 2, OUT, parks=True)
    c6 = ce("order-c", 6, "order.paid", "c-6", 2, dlq("illegal_transition"))

    return [
        a1, e1, b1, c1, a2, retry(a2), m_bad, c2, e3, b3, c3, a3, m1, c4,
        e4, b2, retry(c4), a4, b2_conflict, c5, retry(a4), b4, c7, a5,
        retry(b3), retry(c7), a3_late, c6,
    ]


def phase2() -> list[dict]:
    # After the gap timeout: the missing v2 of order-e arrives too late.
    return [ce("order-e", 2, "order.paid", "e-2", 0,
               dlq("aggregate_quarantined"))]


# Output order per order id: version order, nothing else (rows 6-8).
EXPECTED_VERSIONS = {
    "order-a": [1, 2, 3, 4],
    "order-e": [1],
    "order-b": [1, 2, 3, 4],
    "order-m": [1],
    "order-c": [1, 2, 3, 5, 7],
}
# A new gap counts once per aggregate (semantics §3 row 8): order-e (v3 and
# v4 wait for v2), order-b (v3 waits for v2), order-c (v7 waits for v6).
EXPECTED_GAPS = 3
# One aggregate's deadline fires: order-e.
EXPECTED_GAP_TIMEOUTS = 1

DLQ_REASONS = ["malformed", "idempotency_conflict", "aggregate_quarantined",
               "stale_version", "illegal_transition", "unknown_event_type",
               "version_jump", "gap_timeout", "park_overflow", "version_conflict",
               "output_rejected", "fenced_epoch"]


def _public(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if not k.startswith("_")}


def _total(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic).values())


def _hdr(rec: dict, name: str) -> str | None:
    v = rec["headers_dict"].get(name)
    return None if v is None else v.decode()


def test_demo_scenario_exact(bootstrap, seqgate_bin, tmp_path):
    t_in, t_out, t_dlq = (unique_name("orders"), unique_name("orders-clean"),
                          unique_name("orders-dlq"))
    group, instance = unique_name("sg-scenario"), "seqgate-scenario-1"
    create_topics(bootstrap, {t_in: 3, t_out: 3, t_dlq: 1})

    conf = make_config(bootstrap=bootstrap, group=group, instance=instance,
                       data_dir=str(tmp_path / "data"), input_topic=t_in,
                       output_topic=t_out, dlq_topic=t_dlq,
                       gap_timeout_ms=GAP_TIMEOUT_MS, gap_policy="dlq",
                       state_machine=ORDER_STATE_MACHINE, stats_interval_ms=500)
    sg = Seqgate(seqgate_bin, conf, tmp_path / "run")
    t_start_ms = int(time.time() * 1000)
    try:
        # debug: a "dlq" line per DLQ record
        sg.start(extra_args=["--log-level", "debug"])

        # ---- phase 1: everything but the late v2 of order-e.
        p1 = phase1()
        t_produced = time.monotonic()
        placed1 = produce(bootstrap, t_in, [_public(r) for r in p1])
        n_out = sum(1 for r in p1 if r["_expect"] == OUT)
        n_dlq_now = sum(1 for r in p1 if r["_expect"] != OUT and r["_expect"] != DUP
                        and r["_expect"][1] != "gap_timeout")
        n_gap = sum(1 for r in p1 if r["_expect"] == dlq("gap_timeout"))
        assert (n_out, n_dlq_now, n_gap) == (15, 6, 2)  # the scenario as written

        def tail():
            return "\nseqgate log tail:\n" + sg.log_tail()

        wait_until(lambda: _total(bootstrap, t_out) >= n_out and
                   _total(bootstrap, t_dlq) >= n_dlq_now, 30,
                   "phase-1 output and DLQ records", on_timeout=tail)
        # The gap of order-e times out: >= 3 s of processing time after its
        # records were parked, with no new input (seqgate ticks when idle).
        wait_until(lambda: _total(bootstrap, t_dlq) >= n_dlq_now + n_gap,
                   GAP_TIMEOUT_MS / 1000 + 20, "gap_timeout DLQ records",
                   interval_s=0.05, on_timeout=tail)
        waited = time.monotonic() - t_produced
        assert waited >= GAP_TIMEOUT_MS / 1000, \
            f"gap timed out after {waited:.2f}s, before gap_timeout_ms"

        # ---- phase 2: the late v2 of the quarantined order.
        p2 = phase2()
        placed2 = produce(bootstrap, t_in, [_public(r) for r in p2])
        wait_until(lambda: _total(bootstrap, t_dlq) >= n_dlq_now + n_gap + len(p2),
                   30, "the aggregate_quarantined DLQ record", on_timeout=tail)
        # Let a few more (idle) batches run: anything extra must show up now.
        time.sleep(1.5)
        rc = sg.stop()
        assert rc == 0, f"SIGTERM exit status {rc}\n{sg.log_tail()}"
    finally:
        sg.cleanup()
    t_end_ms = int(time.time() * 1000)

    records = p1 + p2
    placed = placed1 + placed2
    by_pos = {pos: r for r, pos in zip(records, placed)}
    for r, (part, _off) in zip(records, placed):
        assert part == r["partition"]

    out = consume_all(bootstrap, t_out, timeout_s=30)
    dlq_recs = consume_all(bootstrap, t_dlq, timeout_s=30)
    detail = (f"\noutput: {[(_hdr(o, 'ce_id'), o['partition']) for o in out]}"
              f"\ndlq: {[(_hdr(d, 'ce_id'), _hdr(d, '__seqgate.errors.reason')) for d in dlq_recs]}"
              f"\nseqgate log tail:\n{sg.log_tail(60)}")

    # ---- output: exactly the OUT records, each once, traced to its input.
    expected_sources = sorted(f"{t_in}/{p}/{o}" for (p, o), r in by_pos.items()
                              if r["_expect"] == OUT)
    got_sources = sorted(_hdr(o, "__seqgate.source") or "<none>" for o in out)
    assert got_sources == expected_sources, "output records differ" + detail

    per_order = defaultdict(list)
    for o in out:  # consume_all returns (partition, offset) order
        _topic, p, off = _hdr(o, "__seqgate.source").rsplit("/", 2)
        src = by_pos[(int(p), int(off))]
        assert o["partition"] == src["partition"], \
            f"{src['_id']}: output partition {o['partition']} != input {src['partition']}"
        assert o["key"] == src["key"]
        assert o["value"] == src["value"]
        # input headers unchanged and in order, then the provenance header
        assert o["headers"] == src["headers"] + [
            ("__seqgate.source", f"{t_in}/{p}/{off}".encode())], src["_id"]
        per_order[src["_order"]].append(int(src["_seq"]))
    assert dict(per_order) == EXPECTED_VERSIONS, "per-order output" + detail

    # ---- DLQ: exactly the DLQ'd records, with the reason and provenance.
    expected_dlq = Counter()
    for (p, o), r in by_pos.items():
        if r["_expect"] not in (OUT, DUP):
            expected_dlq[(r["_order"], r["_id"], r["_expect"][1], p, o)] += 1
    got_dlq = Counter()
    for d in dlq_recs:
        for name in ("reason", "detail", "topic", "partition", "offset",
                     "group", "instance"):
            assert _hdr(d, f"__seqgate.errors.{name}"), \
                f"DLQ record {_hdr(d, 'ce_id')} lacks __seqgate.errors.{name}"
        assert _hdr(d, "__seqgate.errors.topic") == t_in
        assert _hdr(d, "__seqgate.errors.group") == group
        assert _hdr(d, "__seqgate.errors.instance") == instance
        p = int(_hdr(d, "__seqgate.errors.partition"))
        off = int(_hdr(d, "__seqgate.errors.offset"))
        src = by_pos.get((p, off))
        assert src is not None, f"DLQ record points at no input record {p}/{off}"
        assert d["key"] == src["key"] and d["value"] == src["value"]
        n = len(src["headers"])
        assert d["headers"][:n] == src["headers"], "input headers changed"
        assert all(h.startswith("__seqgate.errors.") for h, _ in d["headers"][n:])
        got_dlq[(d["key"].decode(), _hdr(d, "ce_id"),
                 _hdr(d, "__seqgate.errors.reason"), p, off)] += 1
        # when it was dead-lettered: RFC 3339 UTC with milliseconds, also
        # the record's Kafka timestamp; the input's time in .timestamp
        at = _hdr(d, "__seqgate.errors.dead_lettered_at")
        assert at and re.fullmatch(
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", at), at
        at_ms = int(datetime.strptime(at, "%Y-%m-%dT%H:%M:%S.%f%z")
                    .astimezone(timezone.utc).timestamp() * 1000 + 0.5)
        assert t_start_ms - 1000 <= at_ms <= t_end_ms + 1000, (at, t_start_ms)
        assert d["timestamp"] == at_ms, (d["timestamp"], at)
        assert 0 < int(_hdr(d, "__seqgate.errors.timestamp")) <= at_ms
    assert got_dlq == expected_dlq, "DLQ records differ" + detail

    # ---- a debug "dlq" line per DLQ record, from where the loop produced it
    lines = sg.events("dlq")
    assert all(l["level"] == "debug" for l in lines), lines[:2]
    logged = Counter((l["topic"], l["partition"], l["offset"], l["reason"],
                      l.get("aggregate"), l["dlq_topic"]) for l in lines
                     if "detail" in l)
    # a malformed record keeps the fields that did parse (semantics §3
    # row 1): order-m's version is malformed, its aggregate (the record
    # key) is not
    want_logged = Counter((t_in, p, o, reason, order, t_dlq)
                          for (order, _id, reason, p, o), n in expected_dlq.items()
                          for _ in range(n))
    assert logged == want_logged, (logged, want_logged)

    # ---- final stats line (counters of this one run).
    stats = sg.last_stats()
    assert stats is not None, "no stats line\n" + sg.log_tail()
    verdicts = Counter(r["_expect"] if r["_expect"] in (OUT, DUP) else r["_expect"][1]
                       for r in records)
    want = {
        "records_total": len(records),
        "applied_total": verdicts[OUT],
        "dedup_hits_total": verdicts[DUP],
        "idempotency_parameter_conflicts_total": verdicts["idempotency_conflict"],
        "malformed_total": verdicts["malformed"],
        "stale_version_rejections_total": verdicts["stale_version"],
        "illegal_transitions_total": verdicts["illegal_transition"]
        + verdicts["unknown_event_type"],
        "event_sequence_gaps_total": EXPECTED_GAPS,
        "parked_total": sum(1 for r in records if r["_parks"]),
        "gap_timeouts_total": EXPECTED_GAP_TIMEOUTS,
        "dlq_total": sum(expected_dlq.values()),
        "dlq_by_reason": {reason: verdicts[reason] for reason in DLQ_REASONS},
        "parked_events": 0,
        "quarantined_aggregates": 1,  # order-e, until an operator resolves it
    }
    got = {k: stats.get(k) for k in want}
    assert got == want, f"final stats line: {stats}"
    assert stats["records_in_total"] == len(records)
    assert stats["records_out_total"] == len(out) + len(dlq_recs)
    assert stats["batches_aborted_total"] == 0
    assert stats["delivery_failures_total"] == 0
    assert sg.events("stopped"), "no 'stopped' log line"
