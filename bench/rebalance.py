#!/usr/bin/env python3
"""How long a rebalance stops output: scale-out and failover under load.

Two scenarios, each run once per partition.assignment.strategy (librdkafka's
eager default "range,roundrobin" and KIP-429's "cooperative-sticky"):

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

Figures include: the feeder's pace (RATE events/s over PARTS partitions, one
aggregate version each), seqgate's batch.max_ms (100 ms), the consumer's
fetch interval and this machine's load (printed before and after). They are
ratios of gaps measured in one run, not absolute latencies.

Usage: bench/rebalance.py [--bootstrap HOST:PORT] [--scenario scaleout|
failover|both] [--strategies eager,cooperative-sticky] [--guarantee
exactly_once|at_least_once] [--rate 600] [--steady 8] [--window 20]
Without --bootstrap it starts a broker of its own (deploy/kafka/kafka.sh).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from kafkautil import create_topics, unique_name  # noqa: E402
from seqgate_proc import Seqgate, make_config, wait_until  # noqa: E402
from test_exactly_once import ce, public  # noqa: E402

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
        self.sent = 0

    def run(self) -> None:
        v, t0, i = 1, time.monotonic(), 0
        while not self.halt.is_set():
            agg = self.aggs[i]
            r = public(ce(agg, v))
            self.p.produce(self.topic, key=r["key"], value=r["value"],
                           headers=r["headers"],
                           partition=int(agg[4:]) % PARTS)
            self.sent += 1
            i += 1
            if i == len(self.aggs):
                i, v = 0, v + 1
            self.p.poll(0)
            ahead = t0 + self.sent / self.rate - time.monotonic()
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--binary", default=str(ROOT / "build" / "seqgate"))
    ap.add_argument("--scenario", default="both",
                    choices=["scaleout", "failover", "both"])
    ap.add_argument("--strategies", default="eager,cooperative-sticky")
    ap.add_argument("--guarantee", default="exactly_once",
                    choices=["exactly_once", "at_least_once"])
    ap.add_argument("--rate", type=int, default=600)
    ap.add_argument("--steady", type=float, default=8.0)
    ap.add_argument("--window", type=float, default=20.0)
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
