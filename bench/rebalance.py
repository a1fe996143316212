#!/usr/bin/env python3
"""How long a rebalance stops output: scale-out and failover under load.

Three scenarios, the first two run once per partition.assignment.strategy
(librdkafka's eager default "range,roundrobin" and KIP-429's
"cooperative-sticky"), standby with the first of --strategies:

  scaleout  instances A and B share PARTS input partitions under a feeder at a
            fixed rate; after STEADY seconds a third instance C joins. The
            partitions A and B keep are the "kept" ones, those C takes the
            "moved" ones.
  failover  A and B share the partitions under the feeder; after STEADY
            seconds A is killed (SIGKILL). B takes A's partitions once the
            group's session.timeout.ms has passed.

What is measured: a consumer of the output topic (read_committed: what a
downstream consumer sees, so exactly_once's output counts when its
transaction commits) stamps each record with its arrival time (monotonic,
this process). For each partition the benchmark prints the longest gap
between two successive outputs within the window from the event (C started,
A killed) to WINDOW seconds after it, beside the longest gap of the steady
phase before it (the baseline: the feeder's and the batches' own rhythm).
For failover the gap includes the session timeout (printed; the issue's
goal excludes it): "after detection" subtracts it.

  standby   failover with a primed store and standby replicas (its own
            topics and group): the changelog is primed with --keys K keys
            (K/2 aggregates of one event and their K/2 dedup keys, written
            by bench/scale_prime's engine fast path over the input's
            partitions, bench/README.md "A primed store"); then, for each
            --standbys value (default "1,0": with standby_replicas 1, then
            0 as the before-figure), on fresh data_dirs: A and B start and
            restore, and the benchmark waits until both are ready and, with
            standbys, every standby partition's /readyz standby_lag is 0.
            The cost: --cost-events events at --cost-rate, then until both
            caught up again: each process's CPU-s (/proc/PID/stat utime +
            stime) and write_bytes (/proc/PID/io) per event, its data_dir's
            allocated bytes (the store's headroom included), and the bytes
            the changelog's log segments grew by on the broker (what each
            standby reads once more; --broker-dir or a broker of our own).
            Then --kills times: the feeder runs STEADY seconds, the instance
            owning the most partitions (a tie: the one whose partitions the
            other holds no copy of, then the one not restarted last) is
            killed with SIGKILL, and per moved partition it prints: kill
            -> the survivor's partitions_revoked (eager: the group's
            rebalance began), kill -> the group's rebalance done (the
            survivor's assignment callback began: its first restore's
            start, restore_done's "ts" minus "ms"), kill -> its
            partitions_assigned (logged once every assigned partition is
            restored and handed to the consumer), kill -> the first output
            of the partition after that (the watcher's arrival time), and
            the survivor's restore_done (records read, ms, from which
            offset), its restore_waiting_for_transaction lines and
            takeover_fenced lines (the dead owner's open transaction
            ended); per kill also the survivor's own partitions' longest
            stop from the kill until every moved partition output again;
            log times are the log's "ts" (wall clock, ms). The killed
            instance is restarted (without standbys on an empty data_dir, a
            new machine: the next failover restores from the changelog's
            start) and the next kill waits until both are caught up again. At the
            end the output is read (read_committed) and checked against
            what the feeder produced: nothing lost; with exactly_once
            nothing duplicated. session.timeout.ms is --session-ms (6000).

Figures include: the feeder's pace (RATE events/s over PARTS partitions, one
aggregate version each), seqgate's batch.max_ms (100 ms), the consumer's
fetch interval and this machine's load (printed before and after). They are
ratios of gaps measured in one run, not absolute latencies.

Usage: bench/rebalance.py [--bootstrap HOST:PORT] [--scenario scaleout|
failover|both] [--strategies eager,cooperative-sticky] [--guarantee
exactly_once|at_least_once] [--rate 600] [--steady 8] [--window 20]
       bench/rebalance.py --scenario standby --strategies eager [--keys
10000000] [--standbys 1,0] [--kills 3] [--session-ms 6000] [--cost-events
300000] [--cost-rate 3000] [--json-out FILE] [--broker-dir KAFKA_WORKDIR]
Without --bootstrap it starts a broker of its own (deploy/kafka/kafka.sh).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from kafkautil import (consume_all, create_topics, delete_topics,  # noqa: E402
                       unique_name)
from seqgate_proc import Seqgate, make_config, wait_until  # noqa: E402
from test_exactly_once import ce, public  # noqa: E402

# allocated bytes under a directory (du), as the throughput benchmark counts
from measure import _du as measure_du  # noqa: E402

PARTS = 6
AGGS_PER_PART = 20
STRATEGIES = {"eager": "range,roundrobin",
              "cooperative-sticky": "cooperative-sticky"}
SESSION_MS = 6000


class Feeder(threading.Thread):
    """Produces `rate` events a second, round-robin over the aggregates
    (aggregate i on partition i % PARTS), each the next version."""

    def __init__(self, bootstrap: str, topic: str, rate: int):
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": bootstrap,
                           "enable.idempotence": True, "linger.ms": 5})
        self.topic, self.rate = topic, rate
        self.aggs = [f"agg-{i:03d}" for i in range(PARTS * AGGS_PER_PART)]
        self.halt = threading.Event()
        self.paused = threading.Event()
        self.sent = 0
        self.last: dict[str, int] = {}  # aggregate -> last version produced

    def pause(self) -> None:
        """Stops producing until resume() (the pace restarts from there)."""
        self.paused.set()
        self.p.flush(30)

    def resume(self) -> None:
        self.paused.clear()

    def run(self) -> None:
        v, t0, i, n = 1, time.monotonic(), 0, 0
        while not self.halt.is_set():
            if self.paused.is_set():
                time.sleep(0.02)
                t0, n = time.monotonic(), 0
                continue
            agg = self.aggs[i]
            r = public(ce(agg, v))
            self.p.produce(self.topic, key=r["key"], value=r["value"],
                           headers=r["headers"],
                           partition=int(agg[4:]) % PARTS)
            self.last[agg] = v
            self.sent += 1
            n += 1
            i += 1
            if i == len(self.aggs):
                i, v = 0, v + 1
            self.p.poll(0)
            ahead = t0 + n / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        self.p.flush(30)


class Watcher(threading.Thread):
    """Reads the output topic from its start (read_committed) and keeps each
    record's arrival time by partition."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        self.c = Consumer({"bootstrap.servers": bootstrap,
                           "group.id": unique_name("rb-watch"),
                           "isolation.level": "read_committed",
                           "enable.auto.commit": False,
                           "fetch.wait.max.ms": 10})
        self.c.assign([TopicPartition(topic, p, 0) for p in range(PARTS)])
        self.halt = threading.Event()
        self.times: dict[int, list[float]] = {p: [] for p in range(PARTS)}

    def run(self) -> None:
        while not self.halt.is_set():
            for m in self.c.consume(500, 0.05):
                if not m.error():
                    self.times[m.partition()].append(time.monotonic())
        self.c.close()


def longest_gap(ts: list[float], lo: float, hi: float) -> float:
    """Longest time without an output within [lo, hi] (the window's edges
    count as outputs: a partition silent from lo to hi has gap hi - lo)."""
    pts = [lo] + [t for t in ts if lo <= t <= hi] + [hi]
    return max(b - a for a, b in zip(pts, pts[1:]))


def owned(sg: Seqgate) -> set[int]:
    held: set[int] = set()
    for e in sg.log_lines():
        if e.get("event") == "partitions_assigned":
            held |= {int(p.rsplit("/", 1)[1]) for p in e["partitions"]}
        elif e.get("event") == "partitions_revoked":
            held -= {int(p.rsplit("/", 1)[1]) for p in e["partitions"]}
    return held


def loadavg() -> str:
    return open("/proc/loadavg").read().split()[0]


def run_one(args, binary: str, scenario: str, strategy: str,
            tmp: Path) -> dict:
    tag = unique_name(f"rb-{scenario[:2]}")
    t_in, t_out, t_dlq = f"{tag}-in", f"{tag}-out", f"{tag}-dlq"
    create_topics(args.bootstrap, {t_in: PARTS, t_out: PARTS, t_dlq: 1})

    def conf(name: str) -> dict:
        c = make_config(bootstrap=args.bootstrap, group=f"{tag}-g",
                        instance=name, data_dir=str(tmp / f"{tag}-{name}"),
                        input_topic=t_in, output_topic=t_out, dlq_topic=t_dlq,
                        gap_timeout_ms=600000, guarantee=args.guarantee)
        c["kafka_consumer"].update({
            "partition.assignment.strategy": STRATEGIES[strategy],
            "session.timeout.ms": str(SESSION_MS),
            "heartbeat.interval.ms": "1000"})
        return c

    sgs = {n: Seqgate(binary, conf(n), tmp / f"{tag}-run-{n}")
           for n in ("a", "b", "c")}
    a, b, c = sgs["a"], sgs["b"], sgs["c"]
    feeder, watcher = Feeder(args.bootstrap, t_in, args.rate), \
        Watcher(args.bootstrap, t_out)
    load0 = loadavg()
    try:
        a.start()
        b.start()
        wait_until(lambda: owned(a) and owned(b)
                   and len(owned(a) | owned(b)) == PARTS, 90,
                   "A and B assigned every partition", 0.25)
        watcher.start()
        feeder.start()
        time.sleep(args.steady)
        before_a, before_b = owned(a), owned(b)
        t_event = time.monotonic()
        if scenario == "scaleout":
            c.start(wait_assigned=False)
            wait_until(lambda: bool(owned(c)), 90, "C assigned", 0.05)
        else:
            a.kill9()
            wait_until(lambda: len(owned(b)) == PARTS, 90,
                       "B holds every partition", 0.05)
        t_assigned = time.monotonic() - t_event
        time.sleep(max(0.0, t_event + args.window - time.monotonic()))
        feeder.halt.set()
        feeder.join(60)
        time.sleep(2)  # the last batches
        watcher.halt.set()
        watcher.join(30)
        if scenario == "scaleout":
            kept = (before_a & owned(a)) | (before_b & owned(b))
            moved = owned(c)
        else:
            kept, moved = before_b, before_a
        restores = [e for e in b.events("restore_done")] + \
            [e for e in c.events("restore_done")]
        res = {"scenario": scenario, "strategy": strategy,
               "kept": sorted(kept), "moved": sorted(moved),
               "load": f"{load0}-{loadavg()}", "rows": {},
               "assigned_s": t_assigned,
               "txn_waits": sum(len(s.events(
                   "restore_waiting_for_transaction")) for s in (b, c)),
               "revokes": sum(len(s.events("partitions_revoked"))
                              for s in (a, b)),
               "restore_ms": sum(e.get("ms", 0) or 0 for e in restores
                                 if int(e.get("partition", -1)) in moved)}
        t_lo = t_event - args.steady + 2  # the steady phase, warmed up
        for p in range(PARTS):
            ts = watcher.times[p]
            res["rows"][p] = (longest_gap(ts, t_lo, t_event),
                              longest_gap(ts, t_event,
                                          t_event + args.window))
        return res
    finally:
        feeder.halt.set()
        watcher.halt.set()
        for s in sgs.values():
            if s.runs:
                try:
                    s.stop(timeout_s=60)
                except Exception:  # noqa: BLE001 - a killed one
                    pass
            s.cleanup()


def report(res: dict) -> None:
    print(f"\n{res['scenario']}, {res['strategy']} "
          f"(load {res['load']}; moved partitions' restores "
          f"{res['restore_ms']} ms in all; the new owner assigned "
          f"{res['assigned_s']:.1f} s after the event, watched at 50 ms; "
          f"A's and B's revokes: {res['revokes']}; restores that waited "
          f"for an undecided transaction: {res['txn_waits']})")
    print("  partition  role   steady: longest gap   event window: longest gap")
    for p, (g0, g1) in sorted(res["rows"].items()):
        role = "kept" if p in res["kept"] else \
            "moved" if p in res["moved"] else "-"
        print(f"  {p:9d}  {role:5s}  {g0 * 1000:18.0f} ms  {g1 * 1000:22.0f} ms")
    kept = [res["rows"][p][1] for p in res["kept"]]
    moved = [res["rows"][p][1] for p in res["moved"]]
    if kept:
        print(f"  kept partitions: longest stop {max(kept) * 1000:.0f} ms")
    if moved:
        m = max(moved) * 1000
        extra = ""
        if res["scenario"] == "failover":
            extra = (f" (session.timeout.ms {SESSION_MS} included; after "
                     f"detection: {m - SESSION_MS:.0f} ms)")
        print(f"  moved partitions: longest stop {m:.0f} ms{extra}")


# ---- the standby scenario: failover with a primed store ---------------------

def get_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:  # 503 carries the same JSON
        return e.code, json.loads(e.read())
    except (OSError, ValueError):
        return 0, {}


def wall_to_mono(ts: str, skew: float) -> float:
    """A log line's "ts" (UTC, ms) on this process's monotonic clock
    (skew: time.time() - time.monotonic(), taken once)."""
    t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")
    return t.replace(tzinfo=datetime.timezone.utc).timestamp() - skew


def proc_cost(sg: Seqgate) -> tuple[float, int]:
    """The process's CPU seconds (user + sys) and /proc/PID/io
    write_bytes so far."""
    pid = sg.proc.pid
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    cpu = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    wb = 0
    for line in open(f"/proc/{pid}/io"):
        if line.startswith("write_bytes:"):
            wb = int(line.split()[1])
    return cpu, wb


def store_used_bytes(d: Path | str) -> int | None:
    """The store's used pages x page size (mdb_stat -e, LMDB's own
    utility, read-only: safe while seqgate runs), or None without it."""
    try:
        out = subprocess.run(["mdb_stat", "-e", str(d)], text=True,
                             capture_output=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    f = {k.strip(): v.strip() for k, _, v in
         (line.partition(":") for line in out.splitlines())}
    try:
        return int(f["Number of pages used"]) * int(f["Page size"])
    except (KeyError, ValueError):
        return None


def changelog_bytes(broker_dir: str | None, topic: str) -> int | None:
    """Bytes of the changelog's log segments on the broker (the sum of its
    partitions' *.log files), or None without a broker of our own."""
    if not broker_dir:
        return None
    tot = 0
    for root, dirs, files in os.walk(broker_dir):
        if os.path.basename(root).startswith(topic + "-"):
            tot += sum(os.path.getsize(os.path.join(root, f))
                       for f in files if f.endswith(".log"))
    return tot


def run_standby(args, binary: str, tmp: Path, broker_dir: str | None) -> None:
    """Failover with a primed store, standby_replicas 1 then 0 (see the
    module's docstring, "standby")."""
    tag = unique_name("rb-sb")
    t_in, t_out, t_dlq = f"{tag}-in", f"{tag}-out", f"{tag}-dlq"
    group = f"{tag}-g"
    changelog = f"{group}-{t_in}-changelog"
    create_topics(args.bootstrap, {t_in: PARTS, t_out: PARTS, t_dlq: 1})
    strategy = args.strategies.split(",")[0]
    skew = time.time() - time.monotonic()

    def conf(name: str, standbys: int) -> dict:
        c = make_config(bootstrap=args.bootstrap, group=group,
                        instance=f"{tag}-{name}",
                        data_dir=str(tmp / f"data-{name}"),
                        input_topic=t_in, output_topic=t_out, dlq_topic=t_dlq,
                        gap_timeout_ms=600000, guarantee=args.guarantee)
        c["standby_replicas"] = standbys
        c["kafka_consumer"].update({
            "partition.assignment.strategy": STRATEGIES[strategy],
            "session.timeout.ms": str(args.session_ms),
            "heartbeat.interval.ms": str(min(1000, args.session_ms // 3))})
        return c

    # 1. prime the changelog: K keys, K/2 aggregates of one event each and
    # their K/2 dedup keys, through scale_prime's engine (bench/README.md
    # "A primed store"); the group's offsets at the input's start
    aggs = args.keys // 2
    prime_conf = tmp / "prime.json"
    prime_conf.write_text(json.dumps(conf("a", 0)))
    load0 = loadavg()
    t0 = time.monotonic()
    for _ in range(20):  # a topic just created: its leader may be unknown
        out = subprocess.run([args.prime_tool, "seqgate", "-b",
                              args.bootstrap, "-c", str(prime_conf), "-t",
                              t_in, "-k", str(aggs), "-d", str(aggs)],
                             text=True, capture_output=True)
        if not out.returncode or "leader" not in out.stderr.lower() \
                or "watermarks" not in out.stderr:
            break
        time.sleep(1)
    if out.returncode:
        raise SystemExit(f"scale_prime failed: {out.stderr[-2000:]}")
    out = out.stdout
    pr = json.loads(out.strip().splitlines()[-1])
    print(f"primed {aggs} aggregates + {aggs} dedup keys "
          f"({args.keys} keys) in {time.monotonic() - t0:.0f} s "
          f"(load {load0}-{loadavg()}): {json.dumps(pr)[:300]}", flush=True)

    feeder = Feeder(args.bootstrap, t_in, args.rate)
    feeder.paused.set()
    watcher = Watcher(args.bootstrap, t_out)
    watcher.start()
    feeder.start()
    results = []
    try:
        for standbys in [int(x) for x in args.standbys.split(",")]:
            results.append(standby_phase(args, binary, tmp, broker_dir,
                                         conf, standbys, feeder, watcher,
                                         changelog, skew))
        feeder.halt.set()
        feeder.join(60)
    finally:
        feeder.halt.set()
        watcher.halt.set()
    watcher.join(30)
    # the output: every event the feeder produced, exactly once with
    # exactly_once (read_committed), at least once with at_least_once
    got = consume_all(args.bootstrap, t_out, timeout_s=300)
    dlq = consume_all(args.bootstrap, t_dlq, timeout_s=10)
    seen: dict[tuple[str, int], int] = {}
    for r in got:
        h = r["headers_dict"]
        k = (r["key"].decode(), int(h["ce_sequence"]))
        seen[k] = seen.get(k, 0) + 1
    want = {(a, v) for a, last in feeder.last.items()
            for v in range(1, last + 1)}
    lost = want - set(seen)
    dup = sum(n - 1 for n in seen.values() if n > 1)
    extra = set(seen) - want
    print(f"\noutput check: {len(want)} events produced, {len(seen)} "
          f"distinct in the output ({len(got)} records), lost {len(lost)}, "
          f"duplicated {dup}"
          f"{' (allowed: at_least_once)' if args.guarantee != 'exactly_once' else ''}"
          f", unexpected {len(extra)}, DLQ {len(dlq)}", flush=True)
    for r in results:
        print(json.dumps(r), flush=True)
    # the changelog of K keys is the run's largest part on the broker
    delete_topics(args.bootstrap, [t_in, t_out, t_dlq, changelog])
    if args.json_out:
        with open(args.json_out, "a") as f:
            for r in results:
                f.write(json.dumps({"keys": args.keys,
                                    "guarantee": args.guarantee,
                                    "strategy": strategy,
                                    "session_ms": args.session_ms,
                                    "lost": len(lost), "duplicated": dup,
                                    "dlq": len(dlq), **r}) + "\n")


def standby_phase(args, binary, tmp, broker_dir, conf, standbys, feeder,
                  watcher, changelog, skew) -> dict:
    """One configuration (standby_replicas = standbys): fresh data_dirs, A
    and B restore and catch up; the cost of a steady load; then args.kills
    kills of the instance owning the most partitions under load."""
    for n in ("a", "b"):
        shutil.rmtree(tmp / f"data-{n}", ignore_errors=True)
    sgs = {n: Seqgate(binary, conf(n, standbys), tmp / f"run-{n}-{standbys}")
           for n in ("a", "b")}
    res: dict = {"standby_replicas": standbys, "kills": []}

    def ready(sg: Seqgate) -> bool:
        code, j = get_json(sg.http_url("/readyz"))
        if code != 200:
            return False
        if standbys:
            sb = j.get("standbys", [])
            if len(sb) + int(j.get("partitions", 0)) < PARTS or any(
                    e.get("standby_lag") != 0 for e in sb):
                return False
        return True

    def settled() -> bool:
        a, b = owned(sgs["a"]), owned(sgs["b"])
        return bool(a and b and not a & b and len(a | b) == PARTS
                    and all(ready(s) for s in sgs.values()))

    def tails() -> str:
        return "".join(f"\n--- {n}:\n{s.log_tail(15)}"
                       for n, s in sgs.items() if s.runs)

    try:
        l0, t0 = loadavg(), time.monotonic()
        for s in sgs.values():
            s.start(wait_assigned=False)
        wait_until(settled, args.ready_timeout, "A and B restored, caught up",
                   1.0, on_timeout=tails)
        res["start_s"] = time.monotonic() - t0
        res["start_load"] = f"{l0}-{loadavg()}"
        res["start_restores"] = {
            n: sum(e.get("records", 0) for e in s.events("restore_done"))
            for n, s in sgs.items()}
        print(f"\nstandby_replicas {standbys}: A and B ready in "
              f"{res['start_s']:.0f} s (load {res['start_load']}), "
              f"restored {res['start_restores']}", flush=True)

        # 2. the cost of a steady load
        if args.cost_events:
            res["cost"] = measure_cost(args, sgs, feeder, broker_dir,
                                       changelog, settled, tmp)
            print(f"  cost: {json.dumps(res['cost'])}", flush=True)

        # 3. the kills
        last_restarted = None
        for k in range(args.kills):
            res["kills"].append(one_kill(args, sgs, feeder, watcher, skew,
                                         settled, tails, last_restarted,
                                         standbys, tmp))
            kr = res["kills"][-1]
            last_restarted = kr["killed"]
            print(f"  kill {k + 1}: {json.dumps(kr)}", flush=True)
        return res
    finally:
        feeder.pause()
        for s in sgs.values():
            if s.running():
                try:
                    s.stop(timeout_s=120)
                except Exception:  # noqa: BLE001
                    pass
            s.cleanup()


def measure_cost(args, sgs, feeder, broker_dir, changelog, settled,
                 tmp) -> dict:
    """CPU-s and write_bytes of each instance, over args.cost_events events
    at args.cost_rate until both are caught up again; data_dir sizes; the
    changelog's growth on the broker (what each standby fetches)."""
    before = {n: proc_cost(s) for n, s in sgs.items()}
    cl0 = changelog_bytes(broker_dir, changelog)
    l0 = loadavg()
    sent0 = feeder.sent
    feeder.rate = args.cost_rate
    t0 = time.monotonic()
    feeder.resume()
    wait_until(lambda: feeder.sent - sent0 >= args.cost_events,
               args.cost_events / args.cost_rate * 3 + 60, "the cost load",
               0.05)
    feeder.pause()
    events = feeder.sent - sent0
    feeder.rate = args.rate
    time.sleep(3)  # the last batch, the standbys' last fetch
    wait_until(settled, args.ready_timeout, "caught up after the load", 0.5)
    wall = time.monotonic() - t0
    after = {n: proc_cost(s) for n, s in sgs.items()}
    cl1 = changelog_bytes(broker_dir, changelog)
    out = {"events": events, "wall_s": round(wall, 1),
           "load": f"{l0}-{loadavg()}",
           "changelog_bytes_appended": (cl1 - cl0) if cl0 is not None
           else None}
    for n in sgs:
        cpu = after[n][0] - before[n][0]
        wb = after[n][1] - before[n][1]
        out[n] = {"cpu_s": round(cpu, 2),
                  "cpu_us_per_event": round(cpu / events * 1e6, 1),
                  "write_bytes": wb,
                  "write_bytes_per_event": round(wb / events),
                  "data_dir_bytes": measure_du(tmp / f"data-{n}"),
                  "store_used_bytes": store_used_bytes(tmp / f"data-{n}"),
                  "partitions": len(owned(sgs[n]))}
    return out


def pick_victim(own: dict[str, set[int]], held: dict[str, set[int]],
                last_restarted: str | None) -> tuple[str, str]:
    """The instance to kill, and the survivor (two instances): the one
    owning the most partitions; on a tie the one whose partitions the
    other's store holds no copy of (without standbys: an instance that
    restored every partition at its start, before the group gave half to
    the other, is killed, not made the new owner, so that the failover
    restores from the changelog's start), then the one not restarted
    last. held: the partitions each one's store holds (restored or
    standby)."""
    def other(n: str) -> str:
        return next(m for m in own if m != n)
    order = sorted(own, key=lambda n: (-len(own[n]),
                                       own[n] <= held[other(n)],
                                       n == last_restarted, n))
    return order[0], order[1]


def held_parts(sg: Seqgate) -> set[int]:
    """The partitions the current run's store restored or tails."""
    return {int(e["partition"]) for e in sg.log_lines()
            if e.get("event") in ("restore_done", "standby_tailing")}


def one_kill(args, sgs, feeder, watcher, skew, settled, tails,
             last_restarted, standbys, tmp) -> dict:
    """Load, kill -9 the instance owning the most partitions (a tie: the
    one not restarted last), measure, restart it, wait until caught up."""
    feeder.resume()
    time.sleep(args.steady)
    own = {n: owned(s) for n, s in sgs.items()}
    dead, surv = pick_victim(own, {n: held_parts(s) for n, s in sgs.items()},
                             last_restarted)
    moved = own[dead]
    l0 = loadavg()
    n_assigned = len(sgs[surv].events("partitions_assigned"))
    n_restored = len(sgs[surv].events("restore_done"))
    n_revoked = len(sgs[surv].events("partitions_revoked"))
    n_waits = len(sgs[surv].events("restore_waiting_for_transaction"))
    n_fenced = len(sgs[surv].events("takeover_fenced"))
    t_kill = time.monotonic()
    sgs[dead].kill9()

    def first_new(p: int, after: float) -> float | None:
        return next((t for t in watcher.times[p] if t > after), None)

    def assigned_at(p: int) -> float | None:
        for e in sgs[surv].events("partitions_assigned")[n_assigned:]:
            if any(int(x.rsplit("/", 1)[1]) == p for x in e["partitions"]):
                return wall_to_mono(e["ts"], skew)
        return None

    def back() -> bool:
        for p in moved:
            a = assigned_at(p)
            if a is None or first_new(p, a) is None:
                return False
        return True
    wait_until(back, args.window_max, "the moved partitions' output", 0.05,
               on_timeout=tails)
    t_back = time.monotonic()
    time.sleep(1)
    feeder.pause()
    rows = {}
    restores = sgs[surv].events("restore_done")[n_restored:]
    # the group's rebalance done: the survivor's assignment callback began
    # (its first restore's start: restore_done's ts minus its ms; each
    # assigned partition is restored, a kept one from its own checkpoint)
    begun = min((wall_to_mono(e["ts"], skew) - e["ms"] / 1000
                 for e in restores), default=None)
    revoked = [wall_to_mono(e["ts"], skew) for e in
               sgs[surv].events("partitions_revoked")[n_revoked:]]
    for p in sorted(moved):
        a = assigned_at(p)
        r = [e for e in restores if int(e["partition"]) == p]
        rows[p] = {"revoked_s": round(revoked[0] - t_kill, 3)
                   if revoked else None,
                   "rebalance_s": round(begun - t_kill, 3)
                   if begun is not None else None,
                   "handed_over_s": round(a - t_kill, 3),
                   "first_output_s": round(first_new(p, a) - t_kill, 3),
                   "restore_records": sum(e["records"] for e in r),
                   "restore_s": round(sum(e["ms"] for e in r) / 1000, 3),
                   "restore_from": r[0]["from"] if r else None,
                   "restore_log_start": r[0]["log_start"] if r else None}
    kept = set(range(PARTS)) - moved
    kr = {"killed": dead, "moved": sorted(moved), "load": f"{l0}-{loadavg()}",
          # the survivor's own partitions: the restore runs inside the
          # rebalance callback, so with eager they stop too
          "kept_longest_stop_s": round(max(
              (longest_gap(watcher.times[p], t_kill, t_back) for p in kept),
              default=0.0), 3),
          "waits_for_transaction": len(sgs[surv].events(
              "restore_waiting_for_transaction")) - n_waits,
          # the dead owner's open transaction ended by the new owner
          # (semantics §6 "Taking over from a dead owner"): waited_ms, ms
          "takeover_fenced": [
              {k: e.get(k) for k in ("partition", "waited_ms", "ms")}
              for e in sgs[surv].events("takeover_fenced")[n_fenced:]],
          "rows": rows,
          "worst_first_output_s": max(r["first_output_s"]
                                      for r in rows.values())}
    # the killed instance back: with standbys its own store (it tails what
    # it does not own); without, a new machine (an empty data_dir), so that
    # the next kill's new owner holds no copy of what it takes over
    if not standbys:
        shutil.rmtree(tmp / f"data-{dead}", ignore_errors=True)
    sgs[dead].start(wait_assigned=False)
    wait_until(settled, args.ready_timeout, "caught up after the restart",
               1.0, on_timeout=tails)
    return kr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--binary", default=str(ROOT / "build" / "seqgate"))
    ap.add_argument("--scenario", default="both",
                    choices=["scaleout", "failover", "both", "standby"])
    ap.add_argument("--strategies", default="eager,cooperative-sticky")
    ap.add_argument("--guarantee", default="exactly_once",
                    choices=["exactly_once", "at_least_once"])
    ap.add_argument("--rate", type=int, default=600)
    ap.add_argument("--steady", type=float, default=8.0)
    ap.add_argument("--window", type=float, default=20.0)
    # the standby scenario
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--standbys", default="1,0")
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--session-ms", type=int, default=SESSION_MS)
    ap.add_argument("--cost-events", type=int, default=300_000)
    ap.add_argument("--cost-rate", type=int, default=3000)
    ap.add_argument("--window-max", type=float, default=600.0)
    ap.add_argument("--ready-timeout", type=float, default=3600.0)
    ap.add_argument("--prime-tool",
                    default=str(ROOT / "build" / "bench" / "scale_prime"))
    ap.add_argument("--json-out")
    ap.add_argument("--broker-dir", help="the --bootstrap broker's "
                    "KAFKA_WORKDIR (for the changelog's bytes on disk)")
    args = ap.parse_args()
    broker_dir = None
    if not args.bootstrap:
        broker_dir = tempfile.mkdtemp(prefix="seqgate-rb-kafka.")
        env = dict(os.environ, KAFKA_WORKDIR=broker_dir)
        out = subprocess.run([str(ROOT / "deploy/kafka/kafka.sh"), "start"],
                             env=env, text=True, capture_output=True,
                             check=True).stdout
        args.bootstrap = out.strip().splitlines()[-1]
    tmp = Path(tempfile.mkdtemp(prefix="seqgate-rb."))
    print(f"seqgate {args.binary}, {args.guarantee}, {PARTS} partitions, "
          f"{args.rate} events/s, steady {args.steady} s, window "
          f"{args.window} s, broker {args.bootstrap}")
    try:
        if args.scenario == "standby":
            run_standby(args, args.binary, tmp, broker_dir or args.broker_dir)
            return 0
        scen = ["scaleout", "failover"] if args.scenario == "both" \
            else [args.scenario]
        for s in scen:
            for st in args.strategies.split(","):
                report(run_one(args, args.binary, s, st, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if broker_dir:
            subprocess.run([str(ROOT / "deploy/kafka/kafka.sh"), "stop"],
                           env=dict(os.environ, KAFKA_WORKDIR=broker_dir),
                           capture_output=True, check=False)
            shutil.rmtree(broker_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
