"""seqgatectl audit against a real broker (docs/seqgatectl.md "Audit a topic
before adopting seqgate").

A two-partition topic is written with record timestamps from T0 (seconds
below are T0 + s), three aggregates (record key), gap_timeout_ms 60000:

  partition 0, A:  0 s v1 · 1 s v3 (parked: a gap) · 6 s v2 (fills it:
                   the gap lasted 5000 ms; v2 is 1 version / 5000 ms late)
                   · 7 s v2 again (a duplicate, 1000 ms after its first)
                   · 8 s id A-1 with another payload (idempotency_conflict)
                   · 9 s v2 under a new id (stale_version; 1 version and
                   8000 ms after v3 arrived)
  partition 1, B:  2 s v1 · 3 s v4 (parked: a gap) · 3.5 s v3 (parked,
                   1 version / 500 ms late) · [the deadline 3 s + 60 s
                   passes in the silence: v3 and v4 to the DLQ gap_timeout,
                   B quarantined; the audit ticks at 70 s - 1 ms, so the
                   timed-out gap waited 66999 ms] · 71 s v2
                   (aggregate_quarantined; 2 versions / 68000 ms late)
               C:  70 s v1 · 80 s v1 again (a duplicate, 10000 ms)

test_audit_json checks every number of `audit --json` against that, and
that the audit left no trace: no consumer group, no new topic, the
config's data_dir untouched; --to (a time, exclusive) and --from (an
offset) bound what is read.

test_audit_park_cap_pause: a parking cap pauses the partition and the
audit re-feeds the paused records as the loop does (see its docstring).

test_audit_and_simulate_agree_on_a_full_map: audit and simulate, one
driver, give the same verdicts on records that outgrow a small map.

test_audit_copartitioning: the trial's topic (producers keyed by customer,
"aggregate": "/orderId"; o-50's v1 on partition 0, v2 and v3 on partition
1): the audit's first finding is o-50 on partitions 0 and 1, in --json,
the terminal text and the HTML summary (semantics §2 co-partitioning).

The estimates say how sure they are: test_audit_json checks the sizing's
basis and warning (12 records over 80 s) and each suggestion's sample
count; test_audit_html_summary reads the page's summary (the suggested
gap_timeout_ms and dedup TTL, the store estimate, each with its warning).

test_audit_html renders `--html` in headless Chromium: the page's own
script checks every chart and counter against the embedded JSON (body
data-check="ok"), the SVG bars hold the report's numbers, and a
screenshot is a non-trivial PNG.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from kafkautil import create_topics, produce, unique_name
from seqgate_proc import make_config

SOURCE = "urn:example:audit"
T0 = 1767225600000  # 2026-01-01T00:00:00Z, an hour's start
# Every topic here keeps its records whatever their age: their timestamps
# are T0's, long past the broker's 7-day retention.ms, and its retention
# check (every 5 minutes) would otherwise delete them between the produce
# and the audit ("Offset out of range").
KEEP = {"retention.ms": "-1"}
GAP_TIMEOUT_MS = 60000


def ev(agg: str, seq: int, at_ms: int, partition: int, *, id_: str | None = None,
       payload: str | None = None) -> dict:
    id_ = id_ or f"{agg}-{seq}"
    return {
        "key": agg.encode(),
        "value": (payload or json.dumps({"agg": agg, "seq": seq})).encode(),
        "headers": [("ce_specversion", b"1.0"), ("ce_id", id_.encode()),
                    ("ce_source", SOURCE.encode()),
                    ("ce_type", b"order.updated"),
                    ("ce_sequence", str(seq).encode())],
        "partition": partition,
        "timestamp": T0 + at_ms,
    }


RECORDS = [
    ev("A", 1, 0, 0), ev("A", 3, 1000, 0), ev("A", 2, 6000, 0),
    ev("A", 2, 7000, 0),
    ev("A", 1, 8000, 0, payload='{"agg": "A", "seq": 1, "other": true}'),
    ev("A", 2, 9000, 0, id_="A-2b"),
    ev("B", 1, 2000, 1), ev("B", 4, 3000, 1), ev("B", 3, 3500, 1),
    ev("C", 1, 70000, 1), ev("B", 2, 71000, 1), ev("C", 1, 80000, 1),
]


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def group_ids(bootstrap: str) -> set[str]:
    res = admin(bootstrap).list_consumer_groups(request_timeout=15).result()
    return {g.group_id for g in res.valid}


def topic_names(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=15).topics)


@pytest.fixture(scope="module")
def audited(bootstrap, tmp_path_factory):
    """The topic, written once, and a config naming it."""
    tmp = tmp_path_factory.mktemp("audit")
    names = {k: unique_name(f"sgaudit-{k}") for k in ("in", "out", "dlq", "group")}
    create_topics(bootstrap, {names["in"]: 2}, config=KEEP)
    produce(bootstrap, names["in"], RECORDS)
    data_dir = tmp / "data"
    data_dir.mkdir()
    (data_dir / "sentinel").write_text("untouched\n")
    conf = make_config(bootstrap=bootstrap, group=names["group"],
                       instance="audit-1", data_dir=str(data_dir),
                       input_topic=names["in"], output_topic=names["out"],
                       dlq_topic=names["dlq"], gap_timeout_ms=GAP_TIMEOUT_MS)
    cfg = tmp / "seqgate.json"
    cfg.write_text(json.dumps(conf))
    return {"names": names, "cfg": str(cfg), "data_dir": data_dir, "tmp": tmp}


def audit(binary: str, cfg: str, topic: str, *args: str) -> dict:
    r = subprocess.run([binary, "audit", "--config", cfg, "--topic", topic,
                        "--json", *args], text=True, capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def dir_state(d: Path) -> list[tuple[str, int, int]]:
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                  for p in d.iterdir())


def rate(n: int, span_ms: int) -> float:
    return round(n * 3600000 / span_ms, 3)


# Alone (conftest.py): "nothing left behind" compares the broker's every
# consumer group and topic, and $TMPDIR's entries, before and after; a test
# beside it makes its own in between.
@pytest.mark.serial
def test_audit_json(bootstrap, seqgatectl_bin, audited):
    n = audited["names"]
    groups_before = group_ids(bootstrap)
    topics_before = topic_names(bootstrap)
    data_before = dir_state(audited["data_dir"])
    tmp_before = set(os.listdir(os.environ.get("TMPDIR", "/tmp")))

    rep = audit(seqgatectl_bin, audited["cfg"], n["in"])

    assert rep["topic"] == n["in"]
    assert rep["refetch"] == "unavailable"
    assert [(p["partition"], p["from_offset"], p["to_offset"], p["records"])
            for p in rep["partitions"]] == [(0, 0, 6, 6), (1, 0, 6, 6)]
    assert rep["records"] == 12
    assert rep["first_timestamp"] == "2026-01-01T00:00:00.000Z"
    assert rep["last_timestamp"] == "2026-01-01T00:01:20.000Z"
    span = rep["span_ms"]
    assert span == 80000

    want = {"dedup_hits": 2, "idempotency_parameter_conflicts": 1,
            "stale_version_rejections": 1, "event_sequence_gaps": 2,
            "applied": 5, "malformed": 0, "gap_timeouts": 1}
    assert {k: v["count"] for k, v in rep["counters"].items()} == want
    for k, v in rep["counters"].items():
        assert v["per_hour"] == rate(want[k], span), k
    # 80 s scaled to an hour: an extrapolation, and marked so
    assert rep["per_hour_enough"] is False
    assert rep["per_hour_warning"] == (
        "a span of 80.0 s, under an hour: the rates per hour are "
        "extrapolated from it; audit a longer range (--from, --to)")
    dlq = {"malformed": 0, "idempotency_conflict": 1, "aggregate_quarantined": 1,
           "stale_version": 1, "illegal_transition": 0, "unknown_event_type": 0,
           "version_jump": 0, "gap_timeout": 2, "park_overflow": 0,
           "version_conflict": 0, "output_rejected": 0}
    got_dlq = {k: v["count"] for k, v in rep["dlq"].items()}
    # every reason the engine knows is listed (a newer one counts 0 here)
    assert {k: got_dlq[k] for k in dlq} == dlq
    assert all(v == 0 for k, v in got_dlq.items() if k not in dlq)
    assert rep["dlq"]["gap_timeout"]["per_hour"] == rate(2, span)
    assert rep["at_end"] == {"parked_events": 0, "quarantined_aggregates": 1,
                             "records_left_paused": 0}

    assert rep["top_aggregates"]["by_refusals"] == [
        {"aggregate": "B", "count": 3}, {"aggregate": "A", "count": 2}]
    assert sorted((e["aggregate"], e["count"])
                  for e in rep["top_aggregates"]["by_gaps"]) == [("A", 1), ("B", 1)]

    ro = rep["reorder"]
    assert ro["events"] == 4
    vl, ml = ro["versions_late"], ro["ms_late"]
    assert (vl["count"], vl["p50"], vl["p99"], vl["max"]) == (4, 1, 2, 2)
    assert [b["count"] for b in vl["histogram"]] == [3, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    assert (ml["count"], ml["p50"], ml["p99"], ml["max"]) == (4, 5000, 68000, 68000)
    # 500 | 5000 8000 | 68000 in the buckets <=1s, <=10s, <=10m
    assert [b["count"] for b in ml["histogram"]] == [0, 0, 0, 1, 2, 0, 1, 0, 0, 0]

    g = rep["gaps"]
    assert (g["filled"], g["timed_out"], g["gap_timeout_ms"]) == (1, 1, GAP_TIMEOUT_MS)
    assert (g["duration_ms"]["count"], g["duration_ms"]["max"]) == (1, 5000)
    assert (g["timed_out_waited_ms"]["count"],
            g["timed_out_waited_ms"]["max"]) == (1, 66999)
    # a gap of d ms is filled in time with gap_timeout_ms > d: the
    # quantile (66999, a lower bound: that gap timed out) + 1
    # two gaps: too few for either percentile (each is their maximum), and
    # the report says so (100 needed for p99, 1000 for p99.9)
    assert g["suggested_gap_timeout_ms"] == {
        "p99": {"ms": 67000, "lower_bound": True, "floored": False,
                "samples": 2, "enough": False},
        "p999": {"ms": 67000, "lower_bound": True, "floored": False,
                 "samples": 2, "enough": False}}

    du = rep["duplicates"]
    assert du["repeats"] == 2
    assert (du["delay_ms"]["p50"], du["delay_ms"]["max"]) == (1000, 10000)
    assert du["suggested_dedup_ttl_ms"] == 10001  # TTL > the 10000 ms delay
    assert du["suggested_dedup_ttl_floored"] is False
    assert (du["suggested_dedup_ttl_samples"],
            du["suggested_dedup_ttl_enough"]) == (2, False)
    assert du["dedup_ttl_ms"] == 604800000

    sz = rep["sizing"]
    assert sz["dedup_records"] == 9  # 12 - 2 duplicates - 1 conflict
    assert sz["events_per_day"] == round(12 * 86400000 / span)
    # 9 records are too few to measure: seqgatectl sizing's estimate
    assert sz["store_bytes_used"] > 0
    assert (sz["bytes_per_dedup_record"],
            sz["bytes_per_dedup_record_from"]) == (55, "estimate")
    assert (sz["ttl_ms"], sz["ttl_from"]) == (10001, "suggested_dedup_ttl_ms")
    assert sz["estimated_bytes"] == round(
        12 * 86400000 / span * 55 * 10001 / 86400000)
    assert sz["estimated_bytes_at_dedup_ttl_ms"] == round(
        12 * 86400000 / span * 55 * 604800000 / 86400000)
    # 12 records over 80 s: said, with a warning for both reasons
    assert sz["basis"] == ("12 records over 80 s; 9 dedup records in a "
                           f"temporary store of {sz['store_bytes_used']} bytes")
    assert sz["enough"] is False
    assert ("9 dedup records, fewer than 10000: the bytes per record are "
            "seqgatectl sizing's estimate") in sz["warning"]
    assert "a span of 80 s, under an hour" in sz["warning"]
    # the first finding: every aggregate on one partition here
    assert rep["co_partitioning"] == {
        "aggregates_on_several_partitions": 0,
        "records_off_first_partition": 0, "aggregates": [],
        "records_aggregate_not_record_key": 0,
        "every_aggregate_checked": True}

    assert rep["hourly"] == [{"hour": "2026-01-01T00:00:00.000Z", "records": 12,
                              "duplicates": 2, "gaps": 2}]
    assert rep["limits"]["aggregates_cap_hit"] is False
    assert rep["limits"]["keys_cap_hit"] is False
    assert rep["limits"]["tracked_aggregates"] == 3

    # Nothing left behind: no consumer group, no topic, data_dir untouched,
    # the temporary store removed.
    assert group_ids(bootstrap) - groups_before == set()
    assert n["group"] not in group_ids(bootstrap)
    assert topic_names(bootstrap) == topics_before
    assert dir_state(audited["data_dir"]) == data_before
    tmp_after = set(os.listdir(os.environ.get("TMPDIR", "/tmp")))
    assert not [e for e in tmp_after - tmp_before if "seqgatectl-audit" in e]

    # --to a time (exclusive): the records before 60 s; B's gap is still
    # parked at the end (its deadline never passed in record time).
    rep = audit(seqgatectl_bin, audited["cfg"], n["in"],
                "--to", "2026-01-01T00:01:00Z")
    assert rep["records"] == 9
    assert [p["to_offset"] for p in rep["partitions"]] == [6, 3]
    assert rep["at_end"]["parked_events"] == 2
    assert rep["gaps"]["timed_out"] == 0
    assert rep["dlq"]["gap_timeout"]["count"] == 0
    # --from an offset (every partition), --to a time with an offset: the
    # first record at or after 75 s is partition 1's offset 5 (80 s);
    # partition 0 has none, so it is read to its end.
    rep = audit(seqgatectl_bin, audited["cfg"], n["in"], "--from", "4",
                "--to", "2026-01-01T00:01:15+00:00")
    assert [(p["from_offset"], p["to_offset"]) for p in rep["partitions"]] == \
        [(4, 6), (4, 5)]
    assert rep["records"] == 3  # A's conflict-key and A-2b; B v2 (71 s)


def test_audit_usage(seqgatectl_bin, audited, tmp_path):
    # one input topic configured: --topic may be left out, and the audit
    # says which topic it read (one line on stderr)
    n = audited["names"]
    r = subprocess.run([seqgatectl_bin, "audit", "--config", audited["cfg"],
                        "--json"], text=True, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["records"] == 12
    assert r.stderr.splitlines() == [
        f"seqgatectl: using topic {n['in']} (the config's one input topic)"]
    # the text report warns above the rates it extrapolated
    r = subprocess.run([seqgatectl_bin, "audit", "--config", audited["cfg"]],
                       text=True, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    head = [i for i, l in enumerate(lines) if l.split()[:3] == ["counter", "count", "per"]]
    assert head and lines[head[0] - 1] == (
        "  warning: a span of 80.0 s, under an hour: the rates per hour are "
        "extrapolated from it; audit a longer range (--from, --to)"), r.stdout
    # two topics: --topic is required, and both are named
    doc = json.loads(Path(audited["cfg"]).read_text())
    doc["topics"]["other.in"] = dict(doc["topics"][n["in"]],
                                     output_topic="other.out",
                                     dlq_topic="other.dlq")
    two = tmp_path / "two.json"
    two.write_text(json.dumps(doc))
    r = subprocess.run([seqgatectl_bin, "audit", "--config", str(two)],
                       text=True, capture_output=True, timeout=30)
    assert r.returncode == 2, r
    assert "--topic is required" in r.stderr and "other.in" in r.stderr
    r = subprocess.run([seqgatectl_bin, "audit", "--config", audited["cfg"],
                        "--topic", audited["names"]["in"], "--from", "yesterday"],
                       text=True, capture_output=True, timeout=30)
    assert r.returncode == 2 and "RFC 3339" in r.stderr
    r = subprocess.run([seqgatectl_bin, "audit", "--config", audited["cfg"],
                        "--topic", "not-configured"],
                       text=True, capture_output=True, timeout=30)
    assert r.returncode == 2 and "not in" in r.stderr


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def png_distinct_rows(data: bytes) -> int:
    """How many different pixel rows the (8-bit RGB/RGBA) PNG holds."""
    w, h = png_size(data)
    pos, idat = 8, b""
    bit_depth = color = None
    while pos < len(data):
        ln, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + ln]
        if typ == b"IHDR":
            bit_depth, color = body[8], body[9]
        elif typ == b"IDAT":
            idat += body
        pos += 12 + ln
    raw = zlib.decompress(idat)
    bpp = {2: 3, 6: 4}[color]
    assert bit_depth == 8
    stride = w * bpp + 1
    return len({raw[i * stride + 1:(i + 1) * stride] for i in range(h)})


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    pytest.fail("chromium not found: tests/install-deps.sh installs it",
                pytrace=False)


def test_audit_html(bootstrap, seqgatectl_bin, audited):
    n = audited["names"]
    page = audited["tmp"] / "audit.html"
    rep = audit(seqgatectl_bin, audited["cfg"], n["in"], "--html", str(page))
    html = page.read_text()
    # self-contained: nothing fetched from anywhere
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert ('<p class="warning" id="per-hour-warning">Warning: a span of '
            '80.0 s, under an hour') in html
    assert "<link" not in html

    browser = chromium()
    profile = audited["tmp"] / "chromium-profile"
    flags = ["--headless", "--disable-gpu", "--no-sandbox",
             f"--user-data-dir={profile}", "--virtual-time-budget=5000"]
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()],
                         text=True, capture_output=True, timeout=120)
    assert dom.returncode == 0, dom.stderr
    d = dom.stdout
    # the page's script ran and found every chart equal to the report
    m = re.search(r'<body[^>]*data-check="([^"]*)"', d)
    assert m and m.group(1) == "ok", (m and m.group(1), dom.stderr[-2000:])
    assert "every chart and counter matches" in d

    def bars(chart_id: str) -> list[tuple[str, int]]:
        svg = re.search(rf'<svg id="{chart_id}".*?</svg>', d, re.S)
        assert svg, chart_id
        return [(lbl, int(v)) for lbl, v in re.findall(
            r'<rect class="bar" data-label="([^"]*)" data-value="(\d+)"',
            svg.group(0))]

    def hist(dist: dict) -> list[int]:
        return [b["count"] for b in dist["histogram"]]

    assert [v for _, v in bars("chart-hourly-duplicates")] == [2]
    assert [v for _, v in bars("chart-hourly-gaps")] == [2]
    assert [v for _, v in bars("chart-reorder-versions")] == \
        hist(rep["reorder"]["versions_late"])
    assert [v for _, v in bars("chart-reorder-ms")] == hist(rep["reorder"]["ms_late"])
    assert [v for _, v in bars("chart-gap-duration")] == hist(rep["gaps"]["duration_ms"])
    assert [v for _, v in bars("chart-dup-delay")] == hist(rep["duplicates"]["delay_ms"])
    assert bars("chart-reorder-versions")[0][0] == "&lt;=1"
    counters = dict(re.findall(
        r'<tr data-counter="([^"]+)"><td>[^<]*</td><td class="count">(\d+)</td>', d))
    assert counters["dedup_hits"] == "2"
    assert counters["dlq.gap_timeout"] == "2"
    assert counters["idempotency_parameter_conflicts"] == "1"

    shot = audited["tmp"] / "audit.png"
    r = subprocess.run([browser, *flags, "--window-size=1200,1600",
                        f"--screenshot={shot}", page.as_uri()],
                       text=True, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    data = shot.read_bytes()
    assert png_size(data) == (1200, 1600)
    assert len(data) > 20000
    assert png_distinct_rows(data) > 100  # text and bars, not a blank page


def test_audit_park_cap_pause(bootstrap, seqgatectl_bin, tmp_path):
    """The parking cap pauses the partition (on_park_overflow "pause", the
    default) as the loop does: X's v6 and every later record of the
    partition wait until the gap deadline (v3 parked at 300 ms + 5000 ms)
    passes in record time; then v3..v5 go to the DLQ gap_timeout, X is
    quarantined and v6..v8 are aggregate_quarantined; Y and Z apply."""
    topic = unique_name("sgaudit-pause")
    create_topics(bootstrap, {topic: 1}, config=KEEP)
    recs = ([ev("X", 1, 0, 0)] + [ev("X", v, 100 * v, 0) for v in range(3, 9)]
            + [ev("Y", v, 1000 + 100 * v, 0) for v in range(1, 50)]
            + [ev("Z", 1, 20000, 0)])
    produce(bootstrap, topic, recs)
    conf = make_config(bootstrap=bootstrap, group=unique_name("sgaudit-g"),
                       instance="audit-2", data_dir=str(tmp_path / "data"),
                       input_topic=topic, output_topic="unused.out",
                       dlq_topic="unused.dlq", gap_timeout_ms=5000,
                       max_parked_per_aggregate=3)
    cfg = tmp_path / "seqgate.json"
    cfg.write_text(json.dumps(conf))
    rep = audit(seqgatectl_bin, str(cfg), topic)
    assert rep["records"] == 57
    assert rep["counters"]["applied"]["count"] == 51  # X v1, Y v1..49, Z v1
    assert rep["counters"]["event_sequence_gaps"]["count"] == 1
    assert rep["counters"]["gap_timeouts"]["count"] == 1
    assert {k: v["count"] for k, v in rep["dlq"].items() if v["count"]} == {
        "gap_timeout": 3, "aggregate_quarantined": 3}
    assert rep["at_end"] == {"parked_events": 0, "quarantined_aggregates": 1,
                             "records_left_paused": 0}
    g = rep["gaps"]
    assert (g["filled"], g["timed_out"]) == (0, 1)
    # the deadline fired in the first batch whose clock passed 5300 ms
    assert 5000 <= g["timed_out_waited_ms"]["max"] <= 5000 + 200
    assert not (tmp_path / "data").exists()


def test_audit_and_simulate_agree_on_a_full_map(bootstrap, seqgatectl_bin,
                                               tmp_path):
    """audit and simulate drive the engine with one driver (lib/drive.c):
    the same records and the same config's small map (1 MiB, grown 1 MiB
    at a time) give the same verdicts in both, the map grown as the Kafka
    loop grows it. Before, simulate retried a full map once and stopped
    (MDB_MAP_FULL) while audit ignored the config's map and retried 32
    times."""
    topic = unique_name("sgaudit-map")
    create_topics(bootstrap, {topic: 1}, config=KEEP)
    pad = json.dumps({"pad": "x" * 600})
    recs = [ev(f"m-{i}", 2, i, 0, payload=pad) for i in range(2000)]
    recs += [ev(f"m-{i}", 1, 2000 + i, 0) for i in range(0, 2000, 200)]
    produce(bootstrap, topic, recs)
    conf = make_config(bootstrap=bootstrap, group=unique_name("sgaudit-g"),
                       instance="audit-3", data_dir=str(tmp_path / "data"),
                       input_topic=topic, output_topic="unused.out",
                       dlq_topic="unused.dlq", gap_timeout_ms=600000)
    conf["store"] = {"map_size_bytes": 1048576, "map_growth_bytes": 1048576}
    cfg = tmp_path / "seqgate.json"
    cfg.write_text(json.dumps(conf))
    rep = audit(seqgatectl_bin, str(cfg), topic)
    assert rep["records"] == 2010
    assert rep["counters"]["applied"]["count"] == 20  # 10 v1, 10 released
    assert rep["at_end"]["parked_events"] == 1990

    inp = tmp_path / "in.ndjson"
    inp.write_text("".join(json.dumps({
        "topic": topic, "partition": 0,
        "key": r["key"].decode(), "value": r["value"].decode(),
        "headers": {k: v.decode() for k, v in r["headers"]},
        "timestamp": r["timestamp"]}) + "\n" for r in recs))
    simtmp = tmp_path / "simtmp"
    simtmp.mkdir()
    r = subprocess.run([seqgatectl_bin, "simulate", "--config", str(cfg),
                        "--json", str(inp)], text=True, capture_output=True,
                       timeout=120, env=dict(os.environ, TMPDIR=str(simtmp)))
    assert r.returncode == 0, r.stderr[-2000:]
    verdicts = [json.loads(l)["verdict"] for l in r.stdout.splitlines()]
    assert len(verdicts) == 2020
    assert verdicts.count("parked") == 2000
    assert verdicts.count("applied") + verdicts.count("released") == \
        rep["counters"]["applied"]["count"]
    assert verdicts.count("parked") - verdicts.count("released") == \
        rep["at_end"]["parked_events"]
    assert list(simtmp.iterdir()) == []
    assert not (tmp_path / "data").exists()


def test_audit_suggestions_have_a_floor(bootstrap, seqgatectl_bin, seqgate_bin,
                                        tmp_path):
    """A gap filled in the same millisecond and a duplicate in the same
    millisecond would suggest gap_timeout_ms 1 and a dedup TTL of 1 ms (the
    quantile + 1): fitted to these records, not to the next retry, and a
    TTL dedup.ttl_ms refuses. Both suggestions stop at the documented floor
    of 1000 ms (docs/seqgatectl.md "Audit a topic before adopting seqgate") and
    say so."""
    topic = unique_name("sgaudit-floor")
    create_topics(bootstrap, {topic: 1}, config=KEEP)
    produce(bootstrap, topic, [ev("F", 1, 0, 0), ev("F", 3, 100, 0),
                               ev("F", 2, 100, 0), ev("F", 2, 100, 0)])
    conf = make_config(bootstrap=bootstrap, group=unique_name("sgaudit-g"),
                       instance="audit-3", data_dir=str(tmp_path / "data"),
                       input_topic=topic, output_topic="unused.out",
                       dlq_topic="unused.dlq", gap_timeout_ms=GAP_TIMEOUT_MS)
    cfg = tmp_path / "seqgate.json"
    cfg.write_text(json.dumps(conf))
    rep = audit(seqgatectl_bin, str(cfg), topic)
    g = rep["gaps"]
    assert (g["filled"], g["duration_ms"]["max"]) == (1, 0)
    assert g["suggested_gap_timeout_ms"] == {
        "p99": {"ms": 1000, "lower_bound": False, "floored": True,
                "samples": 1, "enough": False},
        "p999": {"ms": 1000, "lower_bound": False, "floored": True,
                 "samples": 1, "enough": False}}
    du = rep["duplicates"]
    assert (du["repeats"], du["delay_ms"]["max"]) == (1, 0)
    assert du["suggested_dedup_ttl_ms"] == 1000
    assert du["suggested_dedup_ttl_floored"] is True
    # the suggestion is a value the config takes
    conf["topics"][topic]["dedup"] = {"ttl_ms": du["suggested_dedup_ttl_ms"]}
    conf["topics"][topic]["ordering"]["gap_timeout_ms"] = \
        g["suggested_gap_timeout_ms"]["p99"]["ms"]
    cfg.write_text(json.dumps(conf))
    chk = subprocess.run([seqgate_bin, "--check-config", str(cfg)],
                         capture_output=True, text=True, timeout=60)
    assert chk.returncode == 0, chk.stderr
    # the terminal report says it is the floor
    r = subprocess.run([seqgatectl_bin, "audit", "--config", str(cfg),
                        "--topic", topic], text=True, capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "gap_timeout_ms for 99% of gaps: 1000 (the floor:" in r.stdout
    assert "dedup TTL for 99.9% of duplicates: 1000 ms (the floor:" in r.stdout


def test_audit_copartitioning(bootstrap, seqgatectl_bin, tmp_path):
    """The trial: producers keyed by customer, the aggregate read from the
    value (/data/orderId: binary mode, the value is the event's data);
    o-50's v1 went to partition 0, v2 and v3 to partition 1. Partition 1
    alone parks v2 and v3 (and, once the deadline passes, quarantines
    o-50); the audit's first finding names o-50 on partitions 0 and 1."""
    topic = unique_name("sgaudit-copart")
    create_topics(bootstrap, {topic: 2}, config=KEEP)

    def order(cust, order_id, seq, at_ms, partition):
        rec = ev(cust, seq, at_ms, partition, id_=f"{order_id}-{seq}",
                 payload=json.dumps({"orderId": order_id, "seq": seq}))
        return rec

    produce(bootstrap, topic, [
        order("c-1", "o-50", 1, 0, 0), order("c-2", "o-50", 2, 1000, 1),
        order("c-2", "o-50", 3, 2000, 1),
        order("c-3", "o-7", 1, 3000, 0), order("c-3", "o-7", 2, 4000, 0)])
    conf = make_config(bootstrap=bootstrap, group=unique_name("sgaudit-g"),
                       instance="audit-4", data_dir=str(tmp_path / "data"),
                       input_topic=topic, output_topic="unused.out",
                       dlq_topic="unused.dlq", gap_timeout_ms=GAP_TIMEOUT_MS)
    conf["topics"][topic]["envelope"]["aggregate"] = "/data/orderId"
    cfg = tmp_path / "seqgate.json"
    cfg.write_text(json.dumps(conf))
    rep = audit(seqgatectl_bin, str(cfg), topic)
    # the first finding, before the counters
    keys = list(rep)
    assert keys.index("co_partitioning") < keys.index("counters")
    assert rep["co_partitioning"] == {
        "aggregates_on_several_partitions": 1,
        "records_off_first_partition": 2,
        "aggregates": [{"aggregate": "o-50", "partitions": [0, 1],
                        "more_partitions": False,
                        "records_off_first_partition": 2}],
        "records_aggregate_not_record_key": 5,
        "every_aggregate_checked": True}
    # what partition 1 made of it: parked, a gap that never filled
    assert rep["at_end"]["parked_events"] == 2
    # the terminal report says it first, after the two header lines
    r = subprocess.run([seqgatectl_bin, "audit", "--config", str(cfg),
                        "--topic", topic], text=True, capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[3].startswith("FIRST: 1 aggregate has events on more than "
                               "one partition"), lines[:6]
    assert lines[4] == "  o-50: partitions 0, 1; 2 records off partition 0"
    assert "5 records have an aggregate that is not their record key" in lines[5]
    # and the page's summary
    page = tmp_path / "audit.html"
    audit(seqgatectl_bin, str(cfg), topic, "--html", str(page))
    m = re.search(r'<li id="summary-co-partitioning" data-path="([^"]+)" '
                  r'data-value="(\d+)">([^<]*)</li>', page.read_text())
    assert m, page.read_text()[:2000]
    assert m.group(1) == "co_partitioning.aggregates_on_several_partitions"
    assert m.group(2) == "1"
    assert m.group(3).startswith("First: 1 aggregate has events on more than "
                                 "one partition") and "o-50" in m.group(3)


def test_audit_html_summary(seqgatectl_bin, audited):
    """The page's summary shows the suggested gap_timeout_ms and dedup TTL
    and the store estimate, not only the raw JSON, each with how sure it
    is (no browser: the page as written)."""
    n = audited["names"]
    page = audited["tmp"] / "summary.html"
    rep = audit(seqgatectl_bin, audited["cfg"], n["in"], "--html", str(page))
    html = page.read_text()
    items = {i: (p, v, t) for i, p, v, t in re.findall(
        r'<li id="(summary-[\w-]+)" data-path="([^"]+)" data-value="([^"]*)">'
        r'([^<]*)</li>', html)}
    assert list(items) == ["summary-co-partitioning", "summary-gap-timeout-p99",
                           "summary-gap-timeout-p999", "summary-dedup-ttl",
                           "summary-sizing"]
    # the summary comes before the counters
    assert html.index('id="summary"') < html.index('id="counters"')
    p, v, t = items["summary-gap-timeout-p99"]
    assert (p, v) == ("gaps.suggested_gap_timeout_ms.p99.ms", "67000")
    assert t.startswith("Suggested ordering.gap_timeout_ms for 99% of gaps: "
                        "&gt;= 67000")
    assert "warning: from 2 gaps, their maximum; a 99th percentile needs 100" in t
    p, v, t = items["summary-dedup-ttl"]
    assert (p, v) == ("duplicates.suggested_dedup_ttl_ms", "10001")
    assert "10001 ms" in t and "warning: from 2 repeats" in t
    p, v, t = items["summary-sizing"]
    assert v == str(rep["sizing"]["estimated_bytes"])
    assert "12 records over 80 s" in t
    assert "Warning, a rough estimate: 9 dedup records, fewer than 1000" in t
    # the terminal text says the same
    r = subprocess.run([seqgatectl_bin, "audit", "--config", audited["cfg"],
                        "--topic", n["in"]],
                       text=True, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ("ordering.gap_timeout_ms for 99% of gaps: >= 67000 (warning: "
            "from 2 gaps, their maximum; a 99th percentile needs 100)") \
        in r.stdout
    # every key the text and the page name is spelled as the configuration
    # file spells it (ordering.gap_timeout_ms, dedup.ttl_ms), never a
    # flattened name no file has
    for text in (r.stdout, html):
        assert not re.findall(r"(?<![.\w])(gap_timeout_ms|dedup_ttl_ms)\b",
                              re.sub(r"(?s)<script.*?</script>|<[^>]*>", "",
                                     text)), text
    assert "(configured dedup.ttl_ms 604800000;" in r.stdout
    assert "  basis: 12 records over 80 s; 9 dedup records" in r.stdout
    assert "  warning: a rough estimate: 9 dedup records, fewer than 1000" \
        in r.stdout
