#!/usr/bin/env python3
"""seqgate's chaos suite: crashes, rebalances and a broker restart
against a known stream whose exact result is computed independently.

1. Broker: its own private one (deploy/kafka/kafka.sh with a private
   KAFKA_WORKDIR) unless KAFKA_BOOTSTRAP is set; the suite restarts it once
   (`kafka.sh restart`: same work dir, ports and data). With KAFKA_BOOTSTRAP
   the broker restart is skipped and the summary says broker_restarts=0.
2. Topics: input and output with `--partitions` partitions, a DLQ with one.
   The stream comes from tests/chaos/gen.py (seeded), which also gives the
   expected result: applied events per aggregate in order, the DLQ multiset
   of (tag, reason), the fate of every input record.
3. Two seqgate instances (own data_dir, own instance_id; `--instances
   1|2|3`) in one consumer group, small batches (`batch.max_records` 200),
   session.timeout.ms 6000.
   While the generator produces the stream in chunks, a seeded schedule:
   kill -9 a random instance shortly after a chunk landed (so the group has
   work; the group's input lag at the kill is logged) and restart it after a
   random pause (many cycles), add one more instance and remove it again
   (SIGTERM) to force rebalances, restart the broker once. Every instance
   that exits without being told to is restarted and counted (self_exits).
   Partitions move between the instances' stores all the time (both
   guarantees keep a changelog, semantics §6). `--instances 1` runs one
   instance and no add/remove: partitions never move between stores.
   `--quick`: half the aggregates, 30 s of stream, 5 kills, one add/remove
   cycle and a 60 s gap timeout (tests/run.sh runs at_least_once so, after
   the default exactly_once run, then exactly_once with `--standbys 1`).
   `--standbys N` (N <= instances - 1): every instance has
   `standby_replicas: N` (semantics §6 "Standby replicas"), and one kill of
   the schedule (seeded) is a failover: it waits (at most 30 s) until
   every partition of its victim has a caught-up standby on another
   running instance (standby_tailing in that run's log), and the victim
   stays down for the session timeout + 3-5 s, so the group gives its
   partitions to the survivors (with two instances and N = 1 the survivor
   is standby for all of them) before it comes back; the other restarts
   come before the dead member's session expires.
4. Wait until the group's committed offsets reach the input's end offsets,
   the expected gap_timeout DLQ records are there (or a deadline passes) and
   output and DLQ stop growing; SIGTERM every instance.
5. A read_committed reader checks output and DLQ against the expectation and
   prints one summary line:
     chaos: mode=M seed=N events=E kills=K rebalances=R broker_restarts=B
            lost=0 duplicated=0 out_of_order=0 unexpected_dlq=0 missing_dlq=0
            unexpected_output=0 unaccounted=0 self_exits=0 (one line)
   events: input records; rebalances: group membership changes the suite
   caused (a restart after a kill, an add, a remove; the broker restart and
   the expiry of a killed member's session come on top).
   lost: expected applied events missing from the output. duplicated: extra
   copies of an event in the output or of a record in the DLQ (a fault only
   with exactly_once; at_least_once may write a batch in flight again —
   after a crash, a failed delivery or a zombie's batch — so there it is
   counted and reported, never a failure).
   out_of_order: per aggregate, output versions (first copies) not strictly
   increasing, or applied in another order than the model's. unexpected_dlq /
   missing_dlq: the DLQ against the expected (tag, reason) multiset.
   unexpected_output: output records the model does not apply (e.g. a
   conflicting copy, a record routed to the wrong partition). unaccounted:
   input records found neither in the output nor in the DLQ (identical
   redeliveries are accounted by their original).
   self_exits: seqgate runs that ended without being told to. With
   exactly_once the stats lines must also show transactions_total > 0.
   With --standbys N the line ends with
     standbys=N standby_moves=S standby_read=X full_restore_read=Y
     standby_cold=C
   read from every run's log (restores()): standby_moves, partitions
   assigned to an instance that had been tailing them as a caught-up
   standby (standby_stopped "assigned here" with its offset) whose restore
   (the next restore_done) started past the changelog's start;
   standby_read, the changelog offsets those restores read (end - from:
   records, transaction markers, aborted records); full_restore_read,
   what they would have read without the standby (end - log_start);
   standby_cold, standbys whose partition was assigned here before they
   had caught up. The run fails (standby_unused) when standby_moves is 0:
   standbys were configured but no partition move was served by one.
   The line before it counts every restore, those that read the changelog
   from its start, the restore_waiting_for_transaction lines (a restore
   waiting for a dead owner's open transaction: slowness, not a fault),
   and the takeover_fenced / takeover_waiting lines (the new owner ended
   that transaction by fencing the dead owner's transactional id, or could
   not and waited for the coordinator; semantics §6 "Taking over from a
   dead owner").
   Exit status 1 when any fault count is non-zero (duplicated only with
   exactly_once: at_least_once fails on lost, out_of_order, unexpected or
   missing DLQ records, unexpected output and unaccounted records, never
   on duplicates), the group did not finish, or standbys were configured
   and never served a move; 2 on a harness error.

Logs of every seqgate run stay in the run's temp dir (printed); on failure
the tails of the relevant ones are printed.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from confluent_kafka import Consumer, TopicPartition  # noqa: E402

import gen  # noqa: E402
from kafkautil import (CommittedOffsets, consume_all, create_topics,  # noqa: E402
                       end_offsets, unique_name)
from seqgate_proc import Seqgate, make_config  # noqa: E402

KAFKA_SH = ROOT / "deploy" / "kafka" / "kafka.sh"
REASON_H = "__seqgate.errors.reason"
SESSION_TIMEOUT_S = 6.0   # the instances' session.timeout.ms
# the longest the failover kill (--standbys) waits for caught-up standbys
FAILOVER_WAIT_S = 30.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------
# broker

class Broker:
    """The suite's private broker (kafka.sh with its own work dir), or an
    external cluster from KAFKA_BOOTSTRAP (then it cannot be restarted)."""

    def __init__(self, tmp: Path):
        self.external = os.environ.get("KAFKA_BOOTSTRAP")
        self.workdir = None
        self.bootstrap = self.external
        self.env = dict(os.environ)
        self.env.pop("KAFKA_BOOTSTRAP", None)
        if not self.external:
            self.workdir = tmp / "kafka"
            self.workdir.mkdir()
            self.env["KAFKA_WORKDIR"] = str(self.workdir)

    def _sh(self, *args, timeout=180) -> str:
        p = subprocess.run([str(KAFKA_SH), *args], env=self.env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"kafka.sh {' '.join(args)} failed "
                               f"(exit {p.returncode}):\n{p.stderr}")
        return p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""

    def start(self) -> None:
        if self.external:
            log(f"using the cluster at KAFKA_BOOTSTRAP={self.external}")
            return
        t0 = time.monotonic()
        self.bootstrap = self._sh("start")
        log(f"private broker at {self.bootstrap} ({time.monotonic() - t0:.1f}s, "
            f"work dir {self.workdir})")

    def restart(self) -> float:
        t0 = time.monotonic()
        addr = self._sh("restart")
        if addr != self.bootstrap:
            raise RuntimeError(f"restarted broker at {addr}, was {self.bootstrap}")
        return time.monotonic() - t0

    def stop(self) -> None:
        """Stops the broker, leaving its data and logs in the work dir (the
        caller removes the temp dir after a passing run, keeps it otherwise)."""
        if self.workdir is not None:
            try:
                self.env["KAFKA_KEEP_WORKDIR"] = "1"
                self._sh("stop", timeout=120)
            except Exception as e:  # noqa: BLE001
                log(f"broker stop: {e}")

    def log_tail(self, n=40) -> str:
        if self.workdir is None:
            return ""
        p = subprocess.run([str(KAFKA_SH), "logs", str(n)], env=self.env,
                           text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return p.stdout


# ---------------------------------------------------------------------------
# progress probes

class Probe:
    """The group's committed offsets (stable: KIP-447) and topics' high
    watermarks. The offsets are read through a consumer of the group that
    never joins it (kafkautil.CommittedOffsets), not an AdminClient: its
    list_consumer_group_offsets answered NOT_COORDINATOR, as right after
    the broker restart, crashed this process (SIGSEGV in librdkafka,
    test_probes.py). The clients are made anew after a failure and after
    the broker restart."""

    def __init__(self, bootstrap: str, group: str):
        self.bootstrap = bootstrap
        self.group = group
        self.offsets = self.consumer = None
        self.reset()

    def reset(self) -> None:
        self.close()
        # log_level 2: the broker restart is planned; its connection
        # errors are not worth a line each.
        self.offsets = CommittedOffsets(self.bootstrap, self.group,
                                        require_stable=True)
        self.consumer = Consumer({"bootstrap.servers": self.bootstrap,
                                  "group.id": unique_name("chaos-probe"),
                                  "enable.auto.commit": False, "log_level": 2})

    def committed(self, topic: str, parts: int) -> dict[int, int]:
        try:
            return self.offsets.get(topic, parts, timeout_s=10)
        except Exception:  # noqa: BLE001
            self.reset()
            raise

    def high(self, topic: str, parts: int) -> dict[int, int]:
        return {p: self.consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(parts)}

    def close(self) -> None:
        for c in (self.offsets, self.consumer):
            if c is not None:
                c.close()
        self.offsets = self.consumer = None


# ---------------------------------------------------------------------------
# verification

def _tag(rec) -> str | None:
    try:
        return json.loads(rec["value"])["tag"]
    except Exception:  # noqa: BLE001
        return None


def verify(g: dict, out: list[dict], dlq: list[dict], mode: str) -> tuple[dict, list[str]]:
    """Counts of each fault kind and example lines."""
    exp = g["expected"]
    eos = mode == "exactly_once"
    notes: list[str] = []
    c = Counter()
    # expected applied: tag -> (agg, index in the aggregate's applied list)
    exp_applied = {}
    for agg, lst in exp["applied"].items():
        for i, (v, eid, tag) in enumerate(lst):
            exp_applied[tag] = (agg, i, v)
    part_of_agg = {r["agg"]: r["partition"] for r in g["records"]}

    # --- output -----------------------------------------------------------
    copies = Counter()
    first_seq: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for rec in out:  # (partition, offset) order
        tag = _tag(rec)
        copies[tag] += 1
        if tag not in exp_applied:
            c["unexpected_output"] += 1
            if c["unexpected_output"] <= 5:
                notes.append(f"unexpected output record {tag!r} at "
                             f"{rec['partition']}/{rec['offset']} (model: "
                             f"{exp['fate'].get(tag, 'not an input record')})")
            continue
        agg, _i, v = exp_applied[tag]
        if rec["partition"] != part_of_agg[agg]:
            c["unexpected_output"] += 1
            notes.append(f"{tag} in output partition {rec['partition']}, "
                         f"input partition {part_of_agg[agg]}")
        if copies[tag] > 1:
            continue
        first_seq[agg].append((v, tag))
    for tag, n in copies.items():
        if n > 1 and tag in exp_applied:
            c["duplicated"] += n - 1
            if eos and c["duplicated"] <= 5:
                notes.append(f"output: {tag} appears {n} times")
    for tag in exp_applied:
        if copies[tag] == 0:
            c["lost"] += 1
            if c["lost"] <= 5:
                notes.append(f"lost: {tag} (expected applied) not in the output; "
                             f"in DLQ as {[_reason(d) for d in dlq if _tag(d) == tag]}")
    for agg, lst in exp["applied"].items():
        got = first_seq.get(agg, [])
        vs = [v for v, _t in got]
        bad = sum(1 for a, b in zip(vs, vs[1:]) if b <= a)
        # same tags, other order than the model's (also no gap the policy
        # did not allow: a missing version is counted as lost above)
        want_tags = [t for _v, _e, t in lst if copies[t] > 0]
        if bad == 0 and [t for _v, t in got] != want_tags:
            bad = 1
        if bad:
            c["out_of_order"] += bad
            if c["out_of_order"] <= 5:
                notes.append(f"out of order: {agg} output versions {vs}, "
                             f"expected {[v for v, _e, _t in lst]}")

    # --- DLQ --------------------------------------------------------------
    want = Counter((t, r) for t, r in exp["dlq"])
    got = Counter((_tag(d), _reason(d)) for d in dlq)
    for item, n in got.items():
        if item in want:
            extra = n - want[item]
            if extra > 0:
                c["duplicated"] += extra
                if eos:
                    notes.append(f"DLQ: {item} appears {n} times, expected {want[item]}")
        else:
            c["unexpected_dlq"] += n
            if c["unexpected_dlq"] <= 8:
                notes.append(f"unexpected DLQ record {item} x{n} (model: "
                             f"{exp['fate'].get(item[0], 'not an input record')})")
    for item, n in want.items():
        if got[item] < n:
            c["missing_dlq"] += n - got[item]
            if c["missing_dlq"] <= 5:
                notes.append(f"missing DLQ record {item}")

    # --- every input record accounted for -----------------------------------
    seen = set(copies) | {t for t, _r in got}
    for tag in {r["tag"] for r in g["records"]}:
        if tag not in seen:
            c["unaccounted"] += 1
            if c["unaccounted"] <= 5:
                notes.append(f"unaccounted input record {tag} "
                             f"(model: {exp['fate'].get(tag)})")
    return c, notes


def _reason(d) -> str | None:
    v = d["headers_dict"].get(REASON_H)
    return v.decode() if v is not None else None


def restores(runs: list[tuple[str, int, list[dict]]]) -> tuple[Counter, list[str]]:
    """What the restores of every seqgate run read (their restore_done
    lines: from, end, log_start, records), and which were served from a
    standby (semantics §6 "Standby replicas"): in one run, the partition's
    standby_stopped line with reason "assigned here" and the standby's
    offset (it had caught up: standby_tailing), then that partition's next
    restore_done, which started past the changelog's start. Such a restore
    read end - from changelog offsets (records, transaction markers and
    aborted records); without the standby it would have read end -
    log_start. A standby stopped as its partition was assigned here but
    not yet caught up (no offset), or whose partition's restore then read
    from the log start, is "standby_cold". `runs`: (instance, run index,
    log lines in order)."""
    c = Counter()
    notes: list[str] = []
    for name, i, lines in runs:
        warm: dict[tuple, dict] = {}   # (topic, partition) -> standby_stopped
        for line in lines:
            ev = line.get("event")
            tp = (line.get("topic"), line.get("partition"))
            if ev == "restore_waiting_for_transaction":
                c["tx_waits"] += 1
            elif ev in ("takeover_fenced", "takeover_waiting"):
                c[ev] += 1
            elif ev == "standby_stopped" and line.get("reason") == "assigned here":
                warm[tp] = line
            elif ev == "restore_done":
                c["restores"] += 1
                lo, frm, end = line["log_start"], line["from"], line["end"]
                sby = warm.pop(tp, None)
                if sby is not None and "offset" in sby and frm > lo:
                    c["standby_moves"] += 1
                    c["standby_read"] += end - frm
                    c["standby_full"] += end - lo
                    c["standby_records"] += line["records"]
                    if frm != sby["offset"]:
                        # the store's checkpoint is the standby's last
                        # restore_end: a different one is worth a look
                        notes.append(f"{name} run {i + 1}: {tp[0]}/{tp[1]} "
                                     f"restored from {frm}, its standby "
                                     f"stopped at {sby['offset']}")
                    continue
                if sby is not None:
                    c["standby_cold"] += 1
                if frm <= lo < end:
                    c["cold_restores"] += 1
                    c["cold_read"] += end - lo
    return c, notes


def owned(lines: list[dict]) -> set[str]:
    """The input partitions ("topic/partition") a seqgate run holds after
    its log lines: partitions_assigned adds, partitions_revoked removes
    (eager: every partition revoked, then the new set assigned)."""
    held: set[str] = set()
    for line in lines:
        if line.get("event") == "partitions_assigned":
            held |= set(line.get("partitions") or [])
        elif line.get("event") == "partitions_revoked":
            held -= set(line.get("partitions") or [])
    return held


def standbys_ready(lines: list[dict]) -> set[str]:
    """The partitions ("topic/partition") a seqgate run is a caught-up
    standby for after its log lines: standby_tailing (its first catch-up
    done) until standby_stopped, standby_failed or standby_refused."""
    ready: set[str] = set()
    for line in lines:
        ev = line.get("event")
        tp = f"{line.get('topic')}/{line.get('partition')}"
        if ev == "standby_tailing":
            ready.add(tp)
        elif ev in ("standby_stopped", "standby_failed", "standby_refused"):
            ready.discard(tp)
    return ready


# ---------------------------------------------------------------------------
# the run

def main(argv=None) -> int:
    # A crash of this process (a client library's SIGSEGV) prints every
    # thread's Python stack instead of a bare exit 139.
    faulthandler.enable()
    ap = argparse.ArgumentParser(description="seqgate chaos suite")
    ap.add_argument("--seed", type=int, default=None,
                    help="randomness seed (default: random, printed)")
    ap.add_argument("--mode", choices=["exactly_once", "at_least_once"],
                    default="exactly_once", help="seqgate guarantee")
    ap.add_argument("--soak", action="store_true",
                    help="10x the events, 30 kill cycles")
    ap.add_argument("--quick", action="store_true",
                    help="half the events, 30 s of stream, 5 kills, one "
                         "add/remove cycle, 60 s gap timeout")
    ap.add_argument("--binary", default=os.environ.get("SEQGATE_BIN")
                    or str(ROOT / "build" / "seqgate"))
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--instances", type=int, choices=[1, 2, 3], default=2,
                    help="instances that run throughout (default 2); with 1 "
                         "there are no add/remove cycles, so partitions never "
                         "move between stores (crashes and the broker "
                         "restart only)")
    ap.add_argument("--standbys", type=int, default=0, metavar="N",
                    help="standby_replicas N for every instance (default 0; "
                         "at most --instances - 1); the run fails unless a "
                         "partition that moved was restored from a standby")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1, 1 << 31)
    if a.soak and a.quick:
        print("chaos: --soak and --quick exclude each other", file=sys.stderr)
        return 2
    if not 0 <= a.standbys <= a.instances - 1:
        print(f"chaos: --standbys {a.standbys} with --instances {a.instances}: "
              f"at most {a.instances - 1} (an instance is never standby for "
              "its own partitions)", file=sys.stderr)
        return 2
    size = " soak" if a.soak else " quick" if a.quick else ""
    more = "".join(f" --{k} {v}" for k, v, dflt in
                   (("instances", a.instances, 2), ("standbys", a.standbys, 0))
                   if v != dflt)
    print(f"chaos: seed={seed} mode={a.mode}{size}{more} "
          f"(rerun with --mode {a.mode} --seed {seed}"
          f"{size and ' --' + size.strip()}{more})", flush=True)
    if not os.access(a.binary, os.X_OK):
        print(f"chaos: seqgate executable not found at {a.binary}", file=sys.stderr)
        return 2

    scale = {
        "aggregates": 18000 if a.soak else 900 if a.quick else 1800,
        "kills": 30 if a.soak else 5 if a.quick else 8,
        "produce_s": 300.0 if a.soak else 30.0 if a.quick else 60.0,
        "chunks": 100 if a.soak else 12 if a.quick else 20,
        "adds": 3 if a.soak else 1 if a.quick else 2,
        # Far above any stall the chaos causes between a park and its fill,
        # so that only the gaps that never fill time out. A burst of kills
        # keeps an eager group rebalancing (each restart waits for the dead
        # member's session to expire): a partition was seen unowned for 29 s.
        # The default run's chaos lasts 70 s, so 90 s cannot be reached by
        # it; the soak spreads 30 kills over 310 s; the quick run's 5 kills
        # over 40 s stay far from 60 s.
        "gap_timeout_ms": 150000 if a.soak else 60000 if a.quick else 90000,
    }
    tmp = Path(tempfile.mkdtemp(prefix="seqgate-chaos."))
    log(f"temp dir (seqgate logs, data dirs): {tmp}")
    # A private copy: a rebuild of build/seqgate during the run must not
    # mix two versions among the restarts.
    shutil.copy2(a.binary, tmp / "seqgate")
    a.binary = str(tmp / "seqgate")
    broker = Broker(tmp)
    instances: dict[str, Seqgate] = {}
    t_start = time.monotonic()
    rc = 2
    try:
        rc = run(a, seed, scale, tmp, broker, instances)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        _tails(instances, broker, tmp)
        rc = 2
    finally:
        for sg in instances.values():
            sg.cleanup()
        broker.stop()
        log(f"run time {time.monotonic() - t_start:.1f}s")
        if rc == 0 and not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log(f"kept {tmp}")
    return rc


def _tails(instances: dict, broker: Broker, tmp: Path, n: int = 30,
           only: set | None = None) -> None:
    for name, sg in instances.items():
        for i, path in enumerate(sg.runs):
            if only is not None and (name, i) not in only:
                continue
            text = path.read_text(errors="replace").splitlines()
            # The periodic stats lines would crowd out everything else:
            # keep the last one only.
            stats = [i for i, l in enumerate(text) if '"event":"stats"' in l]
            drop = set(stats[:-1])
            text = [l for i, l in enumerate(text) if i not in drop]
            print(f"----- {path} (last {n} lines, stats lines but the last "
                  f"omitted) -----")
            print("\n".join(text[-n:]))
    if broker.workdir is not None:
        print("----- broker log tail -----")
        print(broker.log_tail(20))


def run(a, seed: int, scale: dict, tmp: Path, broker: Broker,
        instances: dict[str, Seqgate]) -> int:
    rng = random.Random(seed)
    g = gen.generate(seed, partitions=a.partitions, aggregates=scale["aggregates"])
    exp = g["expected"]
    (tmp / "expected.json").write_text(json.dumps(exp))
    n_events = len(g["records"])
    log(f"stream: {n_events} records, {sum(len(v) for v in exp['applied'].values())} "
        f"to apply, DLQ {exp['dlq_by_reason']}, {exp['duplicates_dropped']} "
        f"redeliveries, max park span {exp['max_park_span_records']} records")

    broker.start()
    bs = broker.bootstrap
    P = a.partitions
    t_in, t_out, t_dlq = (unique_name("chaos-in"), unique_name("chaos-out"),
                          unique_name("chaos-dlq"))
    group = unique_name("sg-chaos")
    create_topics(bs, {t_in: P, t_out: P, t_dlq: 1})

    def conf(name: str) -> dict:
        c = make_config(bootstrap=bs, group=group, instance=name,
                        data_dir=str(tmp / name / "data"), input_topic=t_in,
                        output_topic=t_out, dlq_topic=t_dlq,
                        gap_timeout_ms=scale["gap_timeout_ms"], gap_policy="dlq",
                        state_machine=gen.STATE_MACHINE, batch_max_records=200,
                        batch_max_ms=100, stats_interval_ms=1000)
        c["guarantee"] = a.mode
        c["kafka_consumer"]["session.timeout.ms"] = str(int(SESSION_TIMEOUT_S * 1000))
        c["kafka_consumer"]["heartbeat.interval.ms"] = "1000"
        if a.standbys:
            c["standby_replicas"] = a.standbys
        return c

    # the instances that run throughout, and the one added and removed
    base = ["sg-a", "sg-b", "sg-c", "sg-d"][:a.instances]
    extra = ["sg-a", "sg-b", "sg-c", "sg-d"][a.instances]
    for name in base + [extra]:
        c = conf(name)
        cp = tmp / f"{name}.check.json"
        cp.write_text(json.dumps(c))
        chk = subprocess.run([a.binary, "--check-config", str(cp)], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if chk.returncode != 0:
            print(f"chaos: config refused by seqgate --check-config:\n{chk.stdout}")
            return 2
        instances[name] = Seqgate(a.binary, c, tmp / name)

    probe = Probe(bs, group)
    counts = Counter()
    produced = threading.Event()
    chunk_done = threading.Condition()
    chunks_done = [0]
    producer_error: list[BaseException] = []

    # --- generator thread: the stream in chunks over produce_s -------------
    def producer_thread():
        try:
            prod = gen.producer(bs)
            recs = g["records"]
            n = scale["chunks"]
            step = (len(recs) + n - 1) // n
            t0 = time.monotonic()
            for i in range(n):
                gen.produce(prod, t_in, recs[i * step:(i + 1) * step], timeout_s=180)
                with chunk_done:
                    chunks_done[0] += 1
                    chunk_done.notify_all()
                wait = t0 + (i + 1) * scale["produce_s"] / n - time.monotonic()
                if wait > 0 and i < n - 1:
                    time.sleep(wait)
            produced.set()
            with chunk_done:
                chunk_done.notify_all()
        except BaseException as e:  # noqa: BLE001
            producer_error.append(e)
            produced.set()

    # --- the chaos schedule ---------------------------------------------------
    horizon = scale["produce_s"] + 10.0
    t0 = time.monotonic()
    kills = scale["kills"]
    kill_at = sorted(rng.uniform(2.0, horizon) for _ in range(kills))
    broker_at = rng.uniform(0.35, 0.6) * horizon if broker.workdir else None
    n_adds = scale["adds"] if a.instances > 1 else 0
    add_at = sorted(rng.uniform(3.0, horizon - 8.0) for _ in range(n_adds))
    plan = [(t, "kill") for t in kill_at] + [(t, "add") for t in add_at]
    # With standbys, one kill (seeded) is a failover: its instance stays
    # down past session.timeout.ms, so the group hands the dead member's
    # partitions to the survivors — where standbys are placed — before it
    # comes back. The other restarts come before the dead member's
    # session expires, and the partitions are then shared with the new
    # member (whose store is its own, cold or old).
    failover_at = rng.choice(kill_at) if a.standbys and kill_at else None
    if broker_at is not None:
        plan.append((broker_at, "broker"))
    plan.sort()
    log(f"schedule: {kills} kills, {n_adds} add/remove cycles, broker restart "
        f"at {broker_at and round(broker_at, 1)}s, over {horizon:.0f}s"
        + (f", failover kill at {failover_at:.1f}s" if failover_at else ""))
    broker_restarts = 0
    self_exits: list[tuple] = []
    bad_stops: list[tuple] = []

    want_up = set(base)          # instances that should be running now

    def failover_ready(name: str) -> None:
        """Before the failover kill of `name`: waits (at most
        FAILOVER_WAIT_S) until every partition it holds has a caught-up
        standby on another running instance — the case standbys are for,
        which a burst of kills just before would not leave (a survivor
        restarted a second ago is standby for nothing yet). Kills anyway
        when that does not come; the run then shows whether a standby
        served the move, as always."""
        t_wait = time.monotonic()
        held: set[str] = set()
        while True:
            held = owned(instances[name].log_lines()) if instances[name].running() else set()
            ready: set[str] = set()
            for o in want_up - {name}:
                if instances[o].running():
                    ready |= standbys_ready(instances[o].log_lines())
            if held and held <= ready:
                log(f"failover kill of {name}: its partitions {sorted(held)} "
                    f"have caught-up standbys (waited "
                    f"{time.monotonic() - t_wait:.1f}s)")
                return
            if time.monotonic() - t_wait > FAILOVER_WAIT_S:
                log(f"failover kill of {name}: no caught-up standby for "
                    f"{sorted(held - ready) or 'its partitions'} after "
                    f"{FAILOVER_WAIT_S:.0f}s; killing it anyway")
                return
            check_alive()
            time.sleep(0.25)

    def check_alive():
        """Restarts an instance that exited without being told to (and says
        so: a seqgate that dies by itself is a finding, not chaos)."""
        for name in sorted(want_up):
            sg = instances[name]
            if not sg.running():
                if len(self_exits) > 50:
                    raise RuntimeError("seqgate keeps exiting by itself "
                                       f"({len(self_exits)} times); giving up")
                time.sleep(1.0)   # no restart storm when it cannot start
                log(f"!! {name} exited by itself with status {sg.proc.returncode}"
                    f" (run {len(sg.runs)}): restarting it")
                counts["self_exits"] += 1
                self_exits.append((name, len(sg.runs) - 1, sg.proc.returncode))
                sg.start(wait_assigned=False)

    # Start the base instances; one that exits on its own is a finding
    # (counted) and restarted, as during the run.
    for name in base:
        instances[name].start(wait_assigned=False)
    ready_by = time.monotonic() + 90
    while not all(instances[n].events("partitions_assigned") for n in base):
        check_alive()
        if time.monotonic() > ready_by:
            raise RuntimeError("the instances did not get partitions within 90s")
        time.sleep(0.2)
    pt = threading.Thread(target=producer_thread, daemon=True)
    pt.start()
    t0 = time.monotonic()

    for t, what in plan:
        while time.monotonic() - t0 < t:
            check_alive()
            time.sleep(0.1)
        check_alive()
        if what == "kill":
            # Land the kill while the group has work: shortly after the
            # next chunk of the stream is in the input topic.
            with chunk_done:
                seen = chunks_done[0]
                chunk_done.wait_for(lambda: chunks_done[0] > seen or produced.is_set(),
                                    timeout=10)
            time.sleep(rng.uniform(0.0, 0.3))
            name = rng.choice(sorted(want_up))
            sg = instances[name]
            if t == failover_at:
                failover_ready(name)
            try:
                com = probe.committed(t_in, P)
                hi = probe.high(t_in, P)
                lag = sum(hi[p] - max(com.get(p, 0), 0) for p in hi)
            except Exception:  # noqa: BLE001
                lag = -1
            if lag > 0:
                counts["busy_kills"] += 1
            sg.kill9()
            counts["kills"] += 1
            counts["rebalances"] += 1   # the restarted member joins the group
            pause = rng.uniform(0.2, 3.0)
            if t == failover_at:
                pause = SESSION_TIMEOUT_S + rng.uniform(3.0, 5.0)
            log(f"kill -9 {name} (run {len(sg.runs)}, group lag {lag}), "
                f"restart in {pause:.1f}s"
                + (" (failover: past its session timeout)" if t == failover_at else ""))
            time.sleep(pause)
            sg.start(wait_assigned=False)
        elif what == "add":
            sg = instances[extra]
            want_up.add(extra)
            sg.start(wait_assigned=False)
            counts["rebalances"] += 1
            stay = rng.uniform(3.0, 8.0)
            log(f"added {extra} (run {len(sg.runs)}) for {stay:.1f}s")
            end = time.monotonic() + stay
            while time.monotonic() < end:
                check_alive()
                time.sleep(0.1)
            want_up.discard(extra)
            if sg.running():
                rc = sg.stop(timeout_s=60)
                if rc != 0:
                    bad_stops.append((extra, len(sg.runs) - 1, rc))
                counts["rebalances"] += 1
                log(f"removed {extra} (SIGTERM, exit {rc})")
        elif what == "broker":
            log("restarting the broker")
            secs = broker.restart()
            broker_restarts += 1
            probe.reset()
            log(f"broker back in {secs:.1f}s")
    produced.wait(timeout=600)
    if producer_error:
        raise producer_error[0]
    check_alive()
    log(f"stream produced ({n_events} records); waiting for the group to finish")

    # --- wait for the end -----------------------------------------------------
    in_end = end_offsets(bs, t_in)
    assert sum(in_end.values()) == n_events, (in_end, n_events)
    want_out = sum(len(v) for v in exp["applied"].values())
    want_dlq = len(exp["dlq"])
    want_dlq_keys = Counter((t, r) for t, r in exp["dlq"])
    want_out_tags = {t for lst in exp["applied"].values() for _v, _e, t in lst}
    # Finished: the committed offsets are the input's end offsets, and the
    # output and DLQ stopped growing (high watermarks unchanged), either with
    # at least the expected numbers of records readable (read_committed: the
    # watermarks also count transaction markers and aborted records), or for
    # longer than a gap timeout (then a wrong result is final: nothing parked
    # can still be released or time out).
    quiet_s = scale["gap_timeout_ms"] / 1000.0 + 5.0
    counted_at = 0.0
    deadline = time.monotonic() + (900 if a.soak else 150)
    last, stable_since = None, time.monotonic()
    done = False
    while time.monotonic() < deadline:
        check_alive()
        try:
            com = probe.committed(t_in, P)
            hi = (sum(probe.high(t_out, P).values()), sum(probe.high(t_dlq, 1).values()))
        except Exception as e:  # noqa: BLE001
            log(f"probe: {type(e).__name__} {e}")
            time.sleep(1)
            continue
        caught_up = com == in_end
        if hi != last:
            last, stable_since = hi, time.monotonic()
        # Output and DLQ high watermarks include transaction markers (and
        # aborted data), so they are a lower bound check only.
        quiet = time.monotonic() - stable_since
        if caught_up and quiet >= quiet_s:
            done = True
            break
        if caught_up and quiet >= 4.0 and time.monotonic() - counted_at >= 5.0:
            counted_at = time.monotonic()
            # Every expected record is there — judged by what the records
            # are, not by how many: at_least_once may write a batch in flight
            # twice, and those copies must not stand in for a gap_timeout
            # record whose deadline has not fired yet.
            got_dlq = Counter((_tag(d), _reason(d)) for d in
                              consume_all(bs, t_dlq, timeout_s=30,
                                          expect_count=want_dlq))
            if all(got_dlq[k] >= n for k, n in want_dlq_keys.items()) and \
                    want_out_tags <= {_tag(o) for o in consume_all(
                        bs, t_out, timeout_s=60, expect_count=want_out)}:
                done = True
                break
        time.sleep(0.5)
    try:
        com = probe.committed(t_in, P)
    except Exception as e:  # noqa: BLE001
        com = f"unknown ({type(e).__name__} {e})"
    log(f"{'finished' if done else 'DEADLINE passed'}: committed "
        f"{com} of {in_end}; output/DLQ high watermarks {last}")
    probe.close()
    want_up.clear()
    for name, sg in instances.items():
        if sg.running():
            rc = sg.stop(timeout_s=60)
            if rc != 0:
                bad_stops.append((name, len(sg.runs) - 1, rc))

    # --- check ----------------------------------------------------------------
    # Every instance is stopped: the high watermarks are final once the
    # last transactions' markers are written (consume_all waits for that,
    # and for the expected numbers of records).
    out = consume_all(bs, t_out, timeout_s=90, expect_count=want_out)
    dlq = consume_all(bs, t_dlq, timeout_s=60, expect_count=want_dlq)
    c, notes = verify(g, out, dlq, a.mode)

    # Did exactly_once really run transactions? (the loop's stats line)
    tx_evidence = 0
    fatal_lines = []
    for name, sg in instances.items():
        for i in range(len(sg.runs)):
            for line in sg.log_lines(i):
                if line.get("event") == "stats":
                    v = line.get("transactions_total")
                    if isinstance(v, (int, float)):
                        tx_evidence = max(tx_evidence, v)
                if line.get("level") == "error":
                    fatal_lines.append((name, i, line))
    rs, rs_notes = restores([(name, i, sg.log_lines(i))
                             for name, sg in instances.items()
                             for i in range(len(sg.runs))])
    notes += rs_notes
    if a.standbys and rs["standby_moves"] == 0:
        notes.append(f"standby_replicas {a.standbys}, but no partition that "
                     "moved was restored from a standby (standby_stopped "
                     "\"assigned here\" with an offset, then a restore_done "
                     f"past the log start): {rs['standby_cold']} standbys "
                     "were not caught up when their partition came")
        c["standby_unused"] = 1
    if a.mode == "exactly_once" and tx_evidence == 0:
        notes.append("mode exactly_once, but no stats line reports "
                     "transactions_total > 0: the loop does not run Kafka "
                     "transactions")
        c["no_transactions"] = 1

    eos = a.mode == "exactly_once"
    faults = {k: c[k] for k in ("lost", "duplicated", "out_of_order", "unexpected_dlq",
                                "missing_dlq", "unexpected_output", "unaccounted")}
    failing = {k: v for k, v in faults.items() if v and (eos or k != "duplicated")}
    if c["no_transactions"]:
        failing["no_transactions"] = 1
    if c["standby_unused"]:
        failing["standby_unused"] = 1
    if not done:
        failing["not_finished"] = 1
    if bad_stops:
        failing["bad_stop"] = len(bad_stops)
        notes.append(f"SIGTERM exit statuses != 0 (name, run index, status): {bad_stops}")
    if self_exits:
        failing["self_exits"] = len(self_exits)
        notes.append(f"seqgate exited by itself (name, run index, status): {self_exits}")
    for n in notes[:40]:
        print(f"  - {n}")
    if fatal_lines:
        by_event = Counter(l.get("event") for _n, _i, l in fatal_lines)
        print(f"  - error-level seqgate log lines by event: {dict(by_event)}")
        # librdkafka's connection errors during the broker restart are
        # expected; show the others.
        others = [x for x in fatal_lines if x[2].get("event") != "librdkafka"]
        for name, i, line in others[:6]:
            print(f"      {name} run {i + 1}: {json.dumps(line)[:400]}")
    print(f"chaos: output {len(out)} records (expected {want_out} distinct), "
          f"DLQ {len(dlq)} (expected {want_dlq}), time {time.monotonic() - t0:.0f}s "
          f"since the first instance, {sum(len(s.runs) for s in instances.values())} "
          f"seqgate runs, {counts['busy_kills']} of {counts['kills']} kills with "
          f"input lag > 0, {rs['restores']} restores ({rs['cold_restores']} "
          f"from the changelog's start: {rs['cold_read']} offsets), "
          f"{rs['tx_waits']} restore_waiting_for_transaction, "
          f"{rs['takeover_fenced']} takeover_fenced, "
          f"{rs['takeover_waiting']} takeover_waiting")
    sby = ""
    if a.standbys:
        sby = (f" standbys={a.standbys} standby_moves={rs['standby_moves']} "
               f"standby_read={rs['standby_read']} "
               f"full_restore_read={rs['standby_full']} "
               f"standby_cold={rs['standby_cold']}")
    print(f"chaos: mode={a.mode} seed={seed} events={n_events} kills={counts['kills']} "
          f"rebalances={counts['rebalances']} broker_restarts={broker_restarts} "
          + " ".join(f"{k}={v}" for k, v in faults.items())
          + f" self_exits={len(self_exits)}{sby}", flush=True)
    if failing:
        print(f"chaos: FAIL {failing}")
        # The last run of each instance, plus every run that logged an error.
        want = {(n, len(sg.runs) - 1) for n, sg in instances.items() if sg.runs}
        want |= {(n, i) for n, i, l in fatal_lines if l.get("event") != "librdkafka"}
        want |= {(n, i) for n, i, _r in self_exits + bad_stops}
        _tails(instances, broker, tmp, only=want)
        return 1
    print("chaos: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
