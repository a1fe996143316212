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
