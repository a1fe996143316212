#!/usr/bin/env python3
"""bench/measure.py — the measuring half of bench/run.sh.

Subcommands (all talk to the broker with confluent-kafka, i.e. librdkafka):

  topics   --bootstrap B NAME:PARTITIONS ...
           create topics (replication factor 1) and wait until they exist.
  run      --bootstrap B --group G --topic IN --out FILE [--timeout S] -- CMD...
           start CMD under `/usr/bin/time -v`, poll the consumer group's
           committed offsets of IN every 200 ms until they reach IN's end
           offsets, then SIGTERM the process (not `time`) and wait for it.
           Appends one JSON line to FILE: wall seconds from process start to
           "everything committed", events/s, peak RSS (KiB, from time -v), exit
           status and the final "stats" log line of the process (read from
           the log file given with --log).
  count    --bootstrap B TOPIC ...
           prints {"TOPIC": records} (sum over partitions of high - low
           watermark; the topics are never compacted or truncated here).
  verify   --bootstrap B --topic OUT --manifest FILE
           reads OUT from the beginning and checks seqgate's promise: every
           aggregate's versions appear exactly once each, as 1, 2, 3, ... in
           order, and the total equals the manifest's distinct events.
  report   --results FILE
           medians per run label, the events/s ratio and a Markdown table.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from confluent_kafka import Consumer, TopicPartition, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


def _partitions(client, topic, timeout=10):
    md = client.list_topics(topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise SystemExit(f"measure.py: topic {topic}: {t.error if t else 'missing'}")
    return sorted(t.partitions)


def _watermarks(consumer, topic):
    out = []
    for p in _partitions(consumer, topic):
        lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                timeout=10)
        out.append((p, lo, hi))
    return out


def _plain_consumer(bootstrap, group="seqgate-bench-measure"):
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False})


def cmd_topics(a):
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    new = []
    for spec in a.topics:
        name, parts = spec.rsplit(":", 1)
        new.append(NewTopic(name, num_partitions=int(parts), replication_factor=1))
    for name, fut in admin.create_topics(new, operation_timeout=30).items():
        try:
            fut.result()
        except KafkaException as e:
            if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise SystemExit(f"measure.py: creating {name}: {e}")
    deadline = time.monotonic() + 30
    for spec in a.topics:
        name = spec.rsplit(":", 1)[0]
        while True:
            md = admin.list_topics(name, timeout=10).topics.get(name)
            if md is not None and md.error is None and md.partitions:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"measure.py: topic {name} did not appear")
            time.sleep(0.1)


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _time_v(path):
    res = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.strip().rpartition(": ")
                if k == "Maximum resident set size (kbytes)":
                    res["peak_rss_kib"] = int(v)
                elif k == "User time (seconds)":
                    res["user_s"] = float(v)
                elif k == "System time (seconds)":
                    res["sys_s"] = float(v)
                elif k == "Exit status":
                    res["exit_status"] = int(v)
                elif k == "Voluntary context switches":
                    res["voluntary_cs"] = int(v)
    except OSError:
        pass
    return res


def _rss_split(pid):
    """Resident memory of @pid by kind (KiB), read just before SIGTERM:
    anonymous (heap, librdkafka queues) vs file-backed (LMDB's mmap)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "RssAnon", "RssFile"):
                    out["end_" + k.lower() + "_kib"] = int(v.split()[0])
    except OSError:
        pass
    return out


def _last_stats(log_path):
    last = None
    try:
        with open(log_path, errors="replace") as f:
            for line in f:
                if '"event":"stats"' in line:
                    try:
                        last = json.loads(line)
                    except ValueError:
                        pass
    except OSError:
        pass
    return last


def _du(path):
    total = 0
    for root, _, files in os.walk(path):
        for fn in files:
            try:
                total += os.stat(os.path.join(root, fn)).st_blocks * 512
            except OSError:
                pass
    return total


def cmd_run(a):
    mon = _plain_consumer(a.bootstrap)
    marks = _watermarks(mon, a.topic)
    end = {p: hi for p, _, hi in marks}
    total = sum(hi - lo for _, lo, hi in marks)
    tps = [TopicPartition(a.topic, p) for p in end]
    poll_c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": a.group,
                       "enable.auto.commit": False})

    log = open(a.log, "wb")
    cmd = ["/usr/bin/time", "-v", "-o", a.time_file] + a.cmd
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    done_at = None
    committed_sum = 0
    while True:
        if proc.poll() is not None:
            break
        try:
            got = poll_c.committed(tps, timeout=5)
            committed_sum = sum(max(0, tp.offset) - 0 for tp in got)
            if all(tp.offset >= end[tp.partition] for tp in got):
                done_at = time.monotonic()
                break
        except KafkaException:
            pass
        if time.monotonic() - t0 > a.timeout:
            break
        time.sleep(0.2)
    wall = (done_at - t0) if done_at else None
    # SIGTERM seqgate itself: GNU time would die of it without reporting.
    kids = _children(proc.pid)
    rss_split = _rss_split(kids[0]) if kids else {}
    for k in kids:
        try:
            os.kill(k, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        for k in _children(proc.pid):
            os.kill(k, signal.SIGKILL)
        proc.wait()
    t_exit = time.monotonic() - t0
    log.close()
    poll_c.close()
    mon.close()

    res = {
        "label": a.label,
        "group": a.group,
        "input_records": total,
        "committed_records": committed_sum,
        "wall_s": round(wall, 3) if wall else None,
        "events_per_s": round(total / wall) if wall else None,
        "exit_after_s": round(t_exit, 3),
        "timed_out": wall is None,
    }
    res.update(_time_v(a.time_file))
    res.update(rss_split)
    if a.data_dir:
        res["store_bytes"] = _du(a.data_dir)
    st = _last_stats(a.log)
    if st:
        res["final_stats"] = st
    with open(a.out, "a") as f:
        f.write(json.dumps(res) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "final_stats"}))
    if wall is None:
        sys.exit(f"measure.py: {a.label}: input not fully committed "
                 f"({committed_sum}/{total}) before exit or timeout; see {a.log}")


def cmd_count(a):
    c = _plain_consumer(a.bootstrap)
    out = {t: sum(hi - lo for _, lo, hi in _watermarks(c, t)) for t in a.topics}
    c.close()
    print(json.dumps(out))


def cmd_verify(a):
    with open(a.manifest) as f:
        man = json.loads(f.read())
    c = Consumer({"bootstrap.servers": a.bootstrap,
                  "group.id": f"seqgate-bench-verify-{os.getpid()}-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    marks = _watermarks(c, a.topic)
    total = sum(hi - lo for _, lo, hi in marks)
    c.assign([TopicPartition(a.topic, p, lo) for p, lo, hi in marks if hi > lo])
    remaining = {p for p, lo, hi in marks if hi > lo}
    last = {}
    seen = 0
    errors = []
    while remaining:
        msgs = c.consume(10000, timeout=5)
        if not msgs:
            errors.append("timed out reading the output topic")
            break
        for m in msgs:
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    remaining.discard(m.partition())
                    continue
                errors.append(str(m.error()))
                continue
            seen += 1
            v = None
            for k, val in m.headers() or []:
                if k == "ce_sequence":
                    v = int(val)
            key = m.key()
            want = last.get(key, 0) + 1
            if v != want and len(errors) < 10:
                errors.append(f"{key!r}: version {v} after {want - 1}")
            last[key] = v if v is not None else want
    c.close()
    ok = (not errors and seen == total == man["distinct_events"]
          and len(last) == man["aggregates"])
    res = {"topic": a.topic, "records": seen, "aggregates": len(last),
           "expected_records": man["distinct_events"],
           "expected_aggregates": man["aggregates"], "in_order": not errors,
           "ok": ok, "errors": errors[:10]}
    print(json.dumps(res))
    if not ok:
        sys.exit(1)


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def cmd_report(a):
    runs = [json.loads(l) for l in open(a.results) if l.strip()]
    by = {}
    for r in runs:
        by.setdefault(r["label"], []).append(r)
    med = {}
    for label, rs in by.items():
        med[label] = {
            "runs": len(rs),
            "events_per_s": _median([r["events_per_s"] for r in rs]),
            "wall_s": _median([r["wall_s"] for r in rs]),
            "peak_rss_kib": _median([r.get("peak_rss_kib") for r in rs]),
            "cpu_s": _median([r.get("user_s", 0) + r.get("sys_s", 0) for r in rs]),
            "store_bytes": _median([r.get("store_bytes") for r in rs]),
            "all": [r["events_per_s"] for r in rs],
        }
    a_ = med.get("plain")
    b_ = med.get("seqgate")
    print("| run | median events/s | runs (events/s) | median wall s | "
          "CPU s (user+sys) | peak RSS MiB | store on disk MiB |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for label, m in med.items():
        st = f"{m['store_bytes'] / 2**20:.0f}" if m["store_bytes"] else "-"
        print(f"| {label} | {m['events_per_s']:.0f} | "
              f"{', '.join(str(x) for x in m['all'])} | {m['wall_s']:.2f} | "
              f"{m['cpu_s']:.1f} | {m['peak_rss_kib'] / 1024:.0f} | {st} |")
    if a_ and b_ and a_["events_per_s"] and b_["events_per_s"]:
        print()
        print(f"plain loop: {a_['events_per_s']:.0f} ev/s; seqgate "
              f"at_least_once: {b_['events_per_s']:.0f} ev/s; ratio "
              f"{b_['events_per_s'] / a_['events_per_s']:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("topics")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("topics", nargs="+")
    p.set_defaults(fn=cmd_topics)
    p = sub.add_parser("run")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--label", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--time-file", required=True)
    p.add_argument("--data-dir")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("cmd", nargs="+")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("count")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("topics", nargs="+")
    p.set_defaults(fn=cmd_count)
    p = sub.add_parser("verify")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--manifest", required=True)
    p.set_defaults(fn=cmd_verify)
    p = sub.add_parser("report")
    p.add_argument("--results", required=True)
    p.set_defaults(fn=cmd_report)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
