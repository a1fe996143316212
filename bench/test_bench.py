"""Unit tests of bench/gen.py's and bench/measure.py's pure parts (no broker):
    build/venv/bin/python -m pytest bench/test_bench.py
(any python with confluent-kafka and pytest, e.g. tests/install-deps.sh's venv)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gen  # noqa: E402
import measure  # noqa: E402


def test_value_of_is_the_json_dumps_bytes():
    # the throughput runs' input stays byte for byte what it was
    for a in (0, 1, 42, 4999, 99999, 123456):
        for v, n in ((1, 9), (3, 9), (9, 9), (11, 12)):
            want = json.dumps({
                "orderId": f"order-{a:06d}", "version": v,
                "customerId": f"cust-{(a * 7919) % 100000:05d}",
                "amountCents": (a * 31 + v * 17) % 100000, "currency": "EUR",
                "status": "created" if v == 1 else ("closed" if v == n else "updated"),
                "note": gen.PAD}, separators=(",", ":")).encode()
            assert gen.value_of(a, v, n) == want


def test_prime_records_are_distinct_interleaved_and_not_in_key_order():
    n, aggs = 100_000, 5_000
    keys = list(gen.prime_records(n, aggs))
    assert len(set(keys)) == n
    assert keys == list(gen.prime_records(n, aggs))  # deterministic
    stream = {f"{a:06d}" for a in range(aggs)}
    assert not stream & set(keys)  # never a stream aggregate
    # every stream aggregate has primed neighbours on both sides in key order
    # (n / aggs = 20 primed keys sort between order-A and order-A+1)
    prefixes = {}
    for k in keys:
        prefixes[k.split(".")[0]] = prefixes.get(k.split(".")[0], 0) + 1
    assert set(prefixes) == stream and set(prefixes.values()) == {n // aggs}
    # not produced in key order: consecutive records land far apart
    ranked = {k: i for i, k in enumerate(sorted(keys))}
    jumps = [abs(ranked[x] - ranked[y]) for x, y in zip(keys, keys[1:1000])]
    assert min(jumps) > n // 100


def test_shards_keep_each_aggregate_whole_and_in_order():
    recs, man = gen.build_stream(20_000, 2_000, 0.10, 0.05, 1000, 2000, 7)
    shards = [gen.shard_of(recs, i, 3) for i in range(3)]
    assert sum(len(s) for s in shards) == len(recs)
    for i, s in enumerate(shards):
        for a in {r[0] for r in s}:
            # an aggregate's records (duplicates, swaps) in the stream's order
            assert [r for r in s if r[0] == a] == [r for r in recs if r[0] == a]
            assert a % 3 == i


def test_percentiles_nearest_rank():
    p = measure._pcts([float(x) for x in range(1, 101)])
    assert (p["p50_ms"], p["p90_ms"], p["p99_ms"], p["max_ms"]) == (50, 90, 99, 100)
    assert measure._pcts([7.0])["p99_ms"] == 7.0
    assert measure._pcts([]) == {}


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the --latency phase's C producer/consumer (built by meson: ninja -C build)
LATENCY_TOOL = os.environ.get("LATENCY_TOOL",
                              os.path.join(ROOT, "build", "bench", "latency_tool"))


def _tool_pcts(xs):
    import subprocess
    assert os.access(LATENCY_TOOL, os.X_OK), \
        f"{LATENCY_TOOL} not built (ninja -C build, or set LATENCY_TOOL)"
    out = subprocess.run([LATENCY_TOOL, "pcts"], input="".join(f"{x!r}\n" for x in xs),
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_latency_tool_percentiles_are_nearest_rank():
    import random
    # known answers: 1..100 ms
    p = _tool_pcts([float(x) for x in range(100, 0, -1)])  # unsorted input
    assert (p["p50_ms"], p["p90_ms"], p["p99_ms"], p["p999_ms"], p["max_ms"]) == \
        (50, 90, 99, 100, 100)
    assert p["mean_ms"] == 50.5
    # 1000 values: p99.9 is the 999th, not the max
    p = _tool_pcts([float(x) for x in range(1, 1001)])
    assert (p["p50_ms"], p["p99_ms"], p["p999_ms"], p["max_ms"]) == (500, 990, 999, 1000)
    assert _tool_pcts([7.25])["p99_ms"] == _tool_pcts([7.25])["max_ms"] == 7.2
    assert _tool_pcts([]) == {}
    # the same arithmetic as measure.py's (the Python consumer's) on
    # random latencies with a long tail
    rnd = random.Random(5)
    for n in (2, 3, 10, 999, 12345):
        xs = [round(rnd.expovariate(1 / 80.0) + rnd.random(), 3) for _ in range(n)]
        got, want = _tool_pcts(xs), measure._pcts(xs)
        for k in ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", "mean_ms"):
            assert abs(got[k] - want[k]) < 0.051, (n, k, got, want)


def test_write_file_holds_the_produced_records(tmp_path):
    # gen.py --write (the paced C producer's input) = the records gen.py
    # produces itself, line by line, in the stream's order
    import subprocess
    f = tmp_path / "in.tsv"
    man = json.loads(subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "gen.py"), "--write", str(f),
         "--events", "3000", "--aggregates", "300"],
        capture_output=True, check=True).stdout)
    recs, want = gen.build_stream(3000, 300, 0.10, 0.05, 1000, 2000, 20260101)
    assert man["records"] == 3000 and man["duplicates"] == want["duplicates"]
    lines = f.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3001
    for line, (a, v, n) in zip(lines, recs):
        key, value, *hs = line.split(b"\t")
        k2, v2, h2 = gen.record_of(a, v, n)
        assert (key, value) == (k2, v2)
        assert [tuple(h.split(b"=", 1)) for h in hs] == [(k.encode(), x) for k, x in h2]


def _tool_analyze(lines, expect, skip=0.1):
    import subprocess
    assert os.access(LATENCY_TOOL, os.X_OK), \
        f"{LATENCY_TOOL} not built (ninja -C build, or set LATENCY_TOOL)"
    r = subprocess.run([LATENCY_TOOL, "analyze", "-r", "-n", str(expect), "-s", str(skip)],
                       input="".join(l + "\n" for l in lines),
                       capture_output=True, text=True)
    return r.returncode, json.loads(r.stdout)


def test_latency_consumer_cut_check_and_floor():
    # input partition 0: 200 records appended 10 ms apart, seen 2..4 ms
    # later; evt-7 redelivered at the end (a second append time)
    ins = [(f"evt-{i}", 1_000_000 + 10 * i) for i in range(200)]
    ins.append(("evt-7", 1_000_000 + 10 * 200))
    lines = [f"in {ts} {ts + 2 + i % 3} {cid}" for i, (cid, ts) in enumerate(ins)]
    # output: partition 0 carries each input's append time (evt-7: the
    # redelivery's), latency 50 + i ms; partition 1 other events, 100 ms
    outs = []
    for i, (cid, ts) in enumerate(ins[:200]):
        if cid == "evt-7":
            ts = ins[200][1]
        outs.append((0, cid, ts, 50.0 + i))
    for i in range(100):
        ts = 1_000_000 + 20 * i
        outs.append((1, f"other-{i}", ts, 100.0))
    lines += [f"out {p} {ts} {ts + lat} {cid}" for p, cid, ts, lat in outs]
    rc, r = _tool_analyze(lines, expect=300)
    assert rc == 0 and r["complete"] and r["output_records"] == 300
    assert (r["checked_p0"], r["out_ts_is_append_time_p0"]) == (200, 200)
    assert r["input_timestamp_types"] == [2] and r["output_timestamp_types"] == [1]
    # warm-up: the first 10 % of the output's append-time span
    first = min(ts for _, _, ts, _ in outs)
    last = max(ts for _, _, ts, _ in outs)
    cut = first + 0.1 * (last - first)
    want = measure._pcts([lat for _, _, ts, lat in outs if ts >= cut])
    assert r["measured"] == sum(1 for _, _, ts, _ in outs if ts >= cut)
    assert r["warmup_skipped"] == 300 - r["measured"] > 0
    for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms"):
        assert abs(r[k] - want[k]) < 0.051, (k, r, want)
    fl = measure._pcts([float(2 + i % 3) for i, (_, ts) in enumerate(ins) if ts >= cut])
    assert r["floor"]["p50_ms"] == fl["p50_ms"] and r["floor"]["max_ms"] == 4.0

    # an output timestamp that is no append time of its ce_id fails the run
    bad = list(lines)
    p, cid, ts, lat = outs[199]
    bad[len(ins) + 199] = f"out 0 {ts + 1} {ts + 1 + lat} {cid}"
    rc, r = _tool_analyze(bad, expect=300)
    assert rc == 1 and r["out_ts_is_append_time_p0"] == 199
    # fewer output records than expected fails it too
    rc, r = _tool_analyze(lines, expect=301)
    assert rc == 1 and not r["complete"]


def test_latency_from_ready_leaves_out_the_wait_for_a_predecessor():
    # aggregate a: v1 appended at 1000, v3 at 1010 (before v2), v2 at 1100,
    # v4 at 1120; the output (in order) sees v1 at 1050, v2 and v3 at 1150,
    # v4 at 1170: v3 waited for v2 (ready 1100), the others did not
    recs = [("a", 1, 1000, 1050), ("a", 2, 1100, 1150), ("a", 3, 1010, 1150),
            ("a", 4, 1120, 1170), ("b", 1, 1005, 1055)]
    lines = [f"out 1 {ts} {seen} evt-{k}-{v} {k} {v}" for k, v, ts, seen in recs]
    rc, r = _tool_analyze(lines, expect=5, skip=0)
    assert rc == 0 and r["waited_for_predecessor"] == 1
    # from the append time: 50, 50, 140, 50, 50; from ready: 50 each
    assert (r["p50_ms"], r["max_ms"]) == (50, 140)
    assert (r["from_ready"]["p50_ms"], r["from_ready"]["max_ms"]) == (50, 50)
    # a version gap breaks the chain: b's v3 without v2 is ready at its ts
    lines.append("out 1 1000 1060 evt-b-3 b 3")
    rc, r = _tool_analyze(lines, expect=6, skip=0)
    assert r["waited_for_predecessor"] == 1 and r["from_ready"]["max_ms"] == 60


def test_rss_sampler_sees_the_childs_anonymous_peak():
    # measure.py run/restore: the process under test is the child of the
    # one started (/usr/bin/time); a child that touches 64 MiB of heap for
    # 1 s must show a sampled RssAnon peak of at least that.
    import subprocess
    code = ("import time; b = bytearray(64 << 20); time.sleep(1.0)")
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys; subprocess.run("
                               f"[sys.executable, '-c', {code!r}])"])
    s = measure._RssSampler(parent.pid, period=0.05)
    parent.wait()
    got = s.stop()
    assert got["rss_samples"] > 0
    assert got["peak_rss_anon_kib"] >= 64 << 10
    assert got["peak_vmrss_sampled_kib"] >= got["peak_rss_anon_kib"]
    assert "peak_rss_file_kib" in got


# ---- the --scale phase: scale_prime's plan and measure.py's figures ---------

SCALE_PRIME = os.environ.get("SCALE_PRIME_TOOL",
                             os.path.join(ROOT, "build", "bench", "scale_prime"))


def _plan(*args):
    import subprocess
    assert os.access(SCALE_PRIME, os.X_OK), \
        f"{SCALE_PRIME} not built (ninja -C build, or set SCALE_PRIME_TOOL)"
    out = subprocess.run([SCALE_PRIME, "plan", *args], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    return [json.loads(x) for x in out[:-1]], json.loads(out[-1])


def test_scale_plan_counts_keys_and_spreads_them_over_the_ttl_window():
    now, ttl, margin = 1_800_000_000_000, 604_800_000, 3_600_000
    evs, p = _plan("-k", "10000", "-d", "25000", "-B", "1000", "-C", "5000",
                   "-N", str(now), "-T", str(ttl), "-n", "25000")
    # D keys over K aggregates: 25000 / 10000 = 2 each, 5000 of them 3
    assert sum(p["part_aggregates"]) == 10000 and sum(p["part_events"]) == 25000
    assert p["events_per_aggregate"] == [2, 3]
    assert len(evs) == 25000
    per = {}
    for e in evs:
        per.setdefault(e["aggregate"], []).append(e["version"])
    assert len(per) == 10000
    assert sorted(len(v) for v in per.values()).count(3) == 5000
    # every aggregate's versions 1..e, in order, created then updated
    assert all(v == list(range(1, len(v) + 1)) for v in per.values())
    assert {e["ce_type"] for e in evs if e["version"] == 1} == {"order.created"}
    assert {e["ce_type"] for e in evs if e["version"] > 1} == {"order.updated"}
    assert len({e["ce_id"] for e in evs}) == 25000
    # batches of whole aggregates: a batch's first-seen times are one;
    # batch b of J at now - (ttl - margin) + (b + 1) (ttl - margin) / J
    assert p["walked_batches"] == p["batches"] and p["ordered"]
    j = p["batches"]
    assert 25 <= j <= 30  # ~1000 events each, cut at whole aggregates and chunks
    span = ttl - margin
    for e in evs:
        assert e["first_seen_ms"] == now - span + (e["batch"] + 1) * span // j
    assert p["first_seen_max_ms"] == now
    assert p["first_seen_min_ms"] == now - span + span // j
    assert p["first_seen_min_ms"] > now - ttl + margin - 1  # none expires in the margin
    by_agg = {}
    for e in evs:
        by_agg.setdefault(e["aggregate"], set()).add(e["first_seen_ms"])
    assert all(len(t) == 1 for t in by_agg.values())  # an aggregate in one batch
    # chunks of about -C events (5000), at aggregate boundaries
    assert p["chunks"] == 5


def test_scale_plan_matches_the_stream_s_partitioner_and_record_shape():
    import hashlib
    import zlib
    evs, p = _plan("-k", "3000", "-A", "1000", "-n", "3000", "-t", "bench-in")
    parts = [0, 0, 0]
    for e in evs:
        key = e["aggregate"].encode()
        # librdkafka's default (consistent_random) = CRC-32 of the key mod
        # partitions: where gen.py's producer (and the probes) put the key
        assert e["partition"] == zlib.crc32(key) % 3
        parts[e["partition"]] += 1
        # ids order-AAAAAA.BBBBB: between the stream's order-AAAAAA
        a, b = e["aggregate"][6:].split(".")
        assert len(a) == 6 and len(b) == 5 and int(b) * 1000 + int(a) < 3000
        # gen.py's value shape (value_of), another orderId
        v = e["value"]
        assert list(v) == ["orderId", "version", "customerId", "amountCents",
                           "currency", "status", "note"]
        assert v["orderId"] == e["aggregate"] and v["note"] == gen.PAD
        # the peer's dedup key (Codec.idempotencyKey): SHA-256 of the input
        # topic, ce_source and ce_id, each 4-byte length-prefixed
        m = hashlib.sha256()
        for part in (b"bench-in", b"/bench/orders", e["ce_id"].encode()):
            m.update(len(part).to_bytes(4, "big") + part)
        assert e["peer_dedup_key"] == m.hexdigest()
    assert parts == p["part_aggregates"]
    # not in key order: consecutive aggregates land far apart
    ranked = {k: i for i, k in enumerate(sorted(e["aggregate"] for e in evs))}
    jumps = [abs(ranked[x["aggregate"]] - ranked[y["aggregate"]])
             for x, y in zip(evs, evs[1:500])]
    assert min(jumps) > 3000 // 100


def test_scale_system_figures_parse_proc_files():
    io = measure._proc_io("rchar: 10\nwchar: 20\nread_bytes: 4096\n"
                          "write_bytes: 8192000\ncancelled_write_bytes: 0\n")
    assert io["write_bytes"] == 8192000 and io["read_bytes"] == 4096
    psi0 = measure._psi_totals("some avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n"
                               "full avg10=0.00 avg60=0.00 avg300=0.00 total=250000\n")
    psi1 = measure._psi_totals("some avg10=9.1 avg60=3.0 avg300=1.0 total=6000000\n"
                               "full avg10=4.0 avg60=1.0 avg300=0.2 total=2250000\n")
    assert psi0 == {"some": 1000000, "full": 250000}
    # 5 s stalled (some), 2 s (full) over a 10 s window
    assert measure._psi_pct(psi0, psi1, 10.0) == {"some": 50.0, "full": 20.0}
    assert measure._psi_pct(psi0, psi1, 0) == {}
    ds = (" 252       0 vda 1000 0 8000 50 2000 10 160000 900 0 700 950 0 0 0 0\n"
          " 252       1 vda1 10 0 80 5 20 0 160 9 0 7 9 0 0 0 0\n")
    assert measure._diskstats_written(ds, "vda") == 160000
    assert measure._diskstats_written(ds, "vdb") is None
    tick = os.sysconf("SC_CLK_TCK")
    stat = (f"4242 (java (x) y) S 1 2 3 4 5 6 7 8 9 10 {30 * tick} {12 * tick} "
            "0 0 20 0 50 0 100")
    assert measure._proc_cpu_s(stat) == 42.0  # utime + stime; a ")" in the name
    assert measure._proc_cpu_s("") is None
    mi = measure._meminfo_kib("MemTotal: 100 kB\nDirty:    3500 kB\n"
                              "Writeback:  700 kB\nWritebackTmp: 0 kB\n")
    assert mi == {"Dirty": 3500, "Writeback": 700}
    # 1,000 events that dirtied 300 pages of 4 KiB: 0.3 pages per event
    assert measure._pages_per_event(4096, 4096 + 300 * 4096, 1000) == 0.3
    assert measure._pages_per_event(None, 1, 10) is None
    assert measure._pages_per_event(0, 1, 0) is None


def test_scale_machine_cpu_from_proc_stat():
    tick = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal
    text = (f"cpu  {10 * tick} {1 * tick} {4 * tick} {30 * tick} {2 * tick} 0 "
            f"{1 * tick} {3 * tick} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert measure._machine_cpu_s(text) == {"busy": 19.0, "idle": 32.0, "steal": 3.0}
    assert measure._machine_cpu_s("") is None


def test_scale_rounds_pair_each_large_run_with_the_base_before_it(capsys):
    def run(k, evs, cpu):
        return {"label": "scale-exactly_once", "prime": {"aggregates": k, "dedup_keys": k},
                "measured_events_per_s": evs,
                "stream": {"cpu_s_per_m": cpu,
                           "thread_cpu_s": {"seqgate": cpu * 0.7, "rdk:broker": 1.5},
                           "machine_cpu_s": {"busy": 20.0, "idle": 4.0, "steal": 0.0}}}
    # the machine slows down between the pairs: the second base is slower
    rows = [run(10000, 100000, 8.0), run(10000000, 80000, 10.0),
            run(10000, 50000, 16.0), run(10000000, 45000, 18.0),
            run(10000, 90000, 9.0), run(10000000, 81000, 10.0)]
    measure._report_scale_cl(rows, [])
    out = capsys.readouterr().out
    assert "3 pairs in turn" in out
    # 0.80, 0.90, 0.90 (each against the base run before it), not against
    # the first base (0.80, 0.45, 0.81)
    assert "ratio to the base run before it 0.80, 0.90, 0.90 (median 0.90)" in out
    assert "0.80, 0.89, 0.90 (median 0.89)" in out  # CPU per 1 M: base / this
    assert "the stream's CPU-s by thread: seqgate 7.0, rdk:broker 1.5" in out


def test_scale_restore_rate_from_restore_done_lines():
    def line(ts, records, ms, **kw):
        return {"event": "restore_done", "ts": ts, "records": records, "ms": ms, **kw}
    # seqgate: partitions one after another
    seq = [line("2026-12-01T10:00:01.000Z", 1000000, 1000),
           line("2026-12-01T10:00:03.000Z", 2000000, 2000),
           line("2026-12-01T10:00:04.000Z", 1000000, 1000)]
    f = measure._restore_figures(seq)
    assert (f["records"], f["ms_sum"], f["span_s"]) == (4000000, 4000, 4.0)
    assert f["records_per_s"] == f["records_per_s_ms_sum"] == 1000000
    # a partition whose restore grew the map: its line counts its last pass
    # (from its checkpoint at 1.5 M); the changelog it read is end -
    # log_start, the time from the process's "running" line
    seq[1] = line("2026-12-01T10:00:03.000Z", 500000, 500, log_start=0,
                  **{"from": 1500000, "end": 2000000})
    t0 = measure._ts("2026-12-01T10:00:00.000Z")
    f = measure._restore_figures(seq, t0)
    assert (f["records"], f["span_s"], f["records_per_s"]) == (4000000, 4.0, 1000000)
    assert f["records_per_s_ms_sum"] == round(2500000 / 2.5)
    # Kafka Streams: several at once; the span counts, not the sum
    par = [line("2026-12-01T10:00:02.000Z", 1000000, 2000),
           line("2026-12-01T10:00:02.000Z", 1000000, 2000)]
    f = measure._restore_figures(par)
    assert (f["span_s"], f["records_per_s"], f["records_per_s_ms_sum"]) == \
        (2.0, 1000000, 500000)
    assert measure._restore_figures([]) == {}


def test_scale_bytes_by_store_and_per_key(tmp_path):
    for store, n in (("dedup", 3), ("agg", 1)):
        d = tmp_path / "app" / "0_1" / "rocksdb" / store
        d.mkdir(parents=True)
        for i in range(n):
            (d / f"{i}.sst").write_bytes(b"x" * 8192)
    (tmp_path / "app" / ".lock").write_bytes(b"")
    by = measure._store_bytes_by(str(tmp_path))
    assert by["dedup"] == 3 * os.stat(tmp_path / "app/0_1/rocksdb/dedup/0.sst").st_blocks * 512
    assert by["dedup"] == 3 * by["agg"] and by.get("other", 0) == 0
    # a peer run: bytes per key of the state.dir, and per store
    r = {"prime": {"aggregates": 1000, "dedup_keys": 3000},
         "measured_events_per_s": 5000,
         "stream": {"data_dir_bytes_ready": 400000, "pages_per_event": 0.25,
                    "cpu_s_per_m": 17.5,
                    "device_pages_per_event": 0.5, "psi_pct": {"some": 7.5, "full": 1.0},
                    "store_bytes_by_ready": {"dedup": 240000, "agg": 64000}},
         "restore": {"records": 4000, "records_per_s": 200000},
         "peak_stream": {"dirty_kib": 2048, "writeback_kib": None}}
    f = measure._scale_derived(r)
    assert f["bytes_per_key"] == 100.0 and f["cpu_s_per_m"] == 17.5
    assert (f["dedup_bytes_per_record"], f["agg_bytes_per_record"]) == (80.0, 64.0)
    assert (f["psi_some_pct"], f["psi_full_pct"]) == (7.5, 1.0)
    assert (f["dirty_peak_mib"], f["writeback_peak_mib"]) == (2, None)
    # seqgate: seqgatectl sizing's bytes per record take precedence
    r["at_ready"] = {"dedup": {"bytes_per_record": 150.04},
                     "aggregates": {"bytes_per_record": 143.3}}
    f = measure._scale_derived(r)
    assert (f["dedup_bytes_per_record"], f["agg_bytes_per_record"]) == (150.0, 143.3)


def test_rebalance_longest_gap():
    import rebalance
    # the window's edges count: silent from 0 to 10 is a 10 s gap
    assert rebalance.longest_gap([], 0.0, 10.0) == 10.0
    # outputs outside the window are not part of it
    assert rebalance.longest_gap([-5.0, 11.0], 0.0, 10.0) == 10.0
    # the longest of the inner gaps and the edges
    assert rebalance.longest_gap([1.0, 2.0, 7.5, 9.0], 0.0, 10.0) == 5.5
    assert rebalance.longest_gap([0.5, 9.0], 0.0, 10.0) == 8.5


def test_schedstat_run_queue_seconds():
    assert measure._schedstat_runq_s("2500000000 1250000000 812\n") == 1.25
    assert measure._schedstat_runq_s("") is None
    assert measure._schedstat_runq_s("12 x 3") is None


def test_rebalance_pick_victim():
    import rebalance
    every = {"a": {0, 1, 2, 3}, "b": {0, 1, 2, 3}}
    # the most partitions first
    assert rebalance.pick_victim({"a": {0}, "b": {1, 2}}, every, None) \
        == ("b", "a")
    # a tie: not the one restarted last
    own = {"a": {0, 1}, "b": {2, 3}}
    assert rebalance.pick_victim(own, every, "a") == ("b", "a")
    assert rebalance.pick_victim(own, every, "b") == ("a", "b")
    assert rebalance.pick_victim(own, every, None) == ("a", "b")
    # a tie: first the one whose partitions the other holds no copy of
    # (b restored all four at its start, a only its own)
    held = {"a": {0, 1}, "b": {0, 1, 2, 3}}
    assert rebalance.pick_victim(own, held, None) == ("b", "a")
    assert rebalance.pick_victim(own, held, "b") == ("b", "a")


def test_rebalance_wall_to_mono():
    import rebalance
    # 2026-12-06T03:00:00.250Z is 1796526000.25 s since the epoch
    assert abs(rebalance.wall_to_mono("2026-12-06T03:00:00.250Z", 1000.0)
               - (1796526000.25 - 1000.0)) < 1e-6
