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
           "everything committed", events/s, peak RSS (KiB, from time -v), the
           peaks of RssAnon / RssFile / VmRSS sampled every 200 ms from
           /proc/PID/status (peak_rss_anon_kib, ...), exit
           status, CPU-s by thread name just before SIGTERM
           (end_thread_cpu_s), the final "stats" log line of the process
           (read from the log file given with --log) and the records/s
           between its consecutive stats lines (stats_interval_rates).
           --mark-offsets '{"0": n0, ...}' (the --scale phase): the priming
           records end there; adds prime_s (start → committed past them) and
           measured_events_per_s (the records committed after that / the
           time from there to the end).
  count    --bootstrap B [--read-committed] TOPIC ...
           prints {"TOPIC": records}: the sum over partitions of high - low
           watermark (the topics are never compacted or truncated here); with
           --read-committed, the data records a read_committed consumer reads
           (a transactional topic's offsets also hold commit markers).
  verify   --bootstrap B --topic OUT --manifest FILE [--read-committed]
           reads OUT from the beginning and checks seqgate's promise: every
           aggregate's versions appear exactly once each, as 1, 2, 3, ... in
           order, and the total equals the manifest's distinct events.
  check    --bootstrap B --out OUT --dlq DLQ --manifest FILE --results FILE
           [--read-committed] [--verify]
           the correctness check of one seqgate (or Kafka Streams peer) run: output records =
           distinct events, DLQ empty, dedup_hits_total (final stats line, the
           last line of --results) = duplicates; --verify adds `verify`.
           Appends {"ok": ...} to FILE.check, prints one line, exits 1 on a
           mismatch.
  changelog --bootstrap B --topic CL [--topic CL2 ...] --events N
           [--log-dir DIR] --out FILE [--label L]
           the changelog's cost: reads CL read_committed from the beginning;
           records, tombstones, key and value bytes per store database (the
           key's first byte), bytes per input event; end offsets; and the
           partitions' size on the broker's disk (DIR/CL-<p>/*) when DIR is
           given, else end offsets x average record size as an estimate.
           Several --topic (Kafka Streams: one changelog per store): the
           totals of all, "by database" per topic (named by what is left of
           it without the topics' common prefix and "-changelog").
  restore  --partitions N --log L --time-file F --out FILE --label L
           [--data-dir D] [--timeout S] -- CMD...
           start CMD (a seqgate on a group whose input is fully committed),
           wait until its log holds a "restore_done" line for N partitions,
           SIGTERM it; appends the restore's timings (from the log lines' ts
           and ms fields), records restored, peak RSS, the store's size.
  latency  --bootstrap B --group G --input IN --output OUT --expect N
           --records FILE --rate R --tool LATENCY_TOOL --manifest F
           --label L --out FILE --log L [--batch-ms MS] [--skip-frac F] -- CMD...
           end-to-end latency at a paced rate: starts the measuring consumer
           (LATENCY_TOOL consume: OUT and partition 0 of IN, read_committed),
           then CMD; waits until group G has IN's partitions (and, with
           --ready-event E --ready-count N, until its log holds N
           "event":"E" lines), then LATENCY_TOOL produce paces FILE (gen.py
           --write) into IN (a topic with message.timestamp.type=
           LogAppendTime) at R records/s. Per output record: the time the
           consumer's poll returned it minus its timestamp, checked on
           partition 0 to be an append time of its ce_id's input records.
           Records appended in the first F (default 0.1) of the production
           are warm-up, not counted. The input's own append -> seen delay is
           the measuring floor. Appends p50/p90/p99/p99.9/max, the floor,
           the producer's and consumer's CPU-s and the load average to
           FILE; then SIGTERM.
  report   --results FILE [--changelog FILE] [--restore FILE]
           [--latency FILE] [--scale FILE]
           medians per run label: events/s, CPU-s per 1 M input events, peak
           RSS, store bytes per input event; the events/s ratios to plain and
           seqgate / Kafka Streams ratios; Markdown tables.
"""
import argparse
import datetime
import glob
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
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
    conf = dict(kv.split("=", 1) for kv in a.config or [])
    new = []
    for spec in a.topics:
        name, parts = spec.rsplit(":", 1)
        new.append(NewTopic(name, num_partitions=int(parts), replication_factor=1,
                            config=conf))
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


def cmd_delete_topics(a):
    """Deletes topics (a --scale run's, once checked and measured: the
    broker then frees their disk)."""
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    for name, fut in admin.delete_topics(a.topics, operation_timeout=60).items():
        try:
            fut.result()
        except KafkaException as e:
            print(f"measure.py: deleting {name}: {e}", file=sys.stderr)


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


def _status_kib(pid):
    """VmRSS, RssAnon and RssFile of @pid (KiB) from /proc/PID/status;
    {} when it is gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "RssAnon", "RssFile"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def _rss_split(pid):
    """Resident memory of @pid by kind (KiB), read just before SIGTERM:
    anonymous (heap, librdkafka queues) vs file-backed (LMDB's mmap)."""
    return {"end_" + k.lower() + "_kib": v for k, v in _status_kib(pid).items()}


# ---- the --scale phase's system figures (pure parsers, bench/test_bench.py) --

def _read(path):
    """A /proc or /sys file's text, "" when it cannot be read."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _proc_io(text):
    """/proc/PID/io as {field: int}: write_bytes is what the process caused
    to be written to storage, counted when a page is dirtied (a page
    written through a map and dirtied again before its writeback counts
    once), read_bytes what it caused to be read."""
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if v.strip().isdigit():
            out[k.strip()] = int(v)
    return out


def _proc_cpu_s(text):
    """CPU seconds (user + system, every thread) of a process from its
    /proc/PID/stat text; None if it cannot be read."""
    try:
        rest = text[text.rindex(")") + 2:].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    except (ValueError, IndexError):
        return None


def _psi_totals(text):
    """/proc/pressure/io (PSI): {"some": µs, "full": µs}, the total time
    some (at least one) / all non-idle tasks were stalled on I/O."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if f and f[0] in ("some", "full"):
            for x in f[1:]:
                if x.startswith("total="):
                    out[f[0]] = int(x[6:])
    return out


def _psi_pct(t0, t1, seconds):
    """The share (%) of @seconds that some / all tasks were stalled on I/O,
    from two _psi_totals readings that far apart."""
    if not seconds or seconds <= 0:
        return {}
    return {k: round(100.0 * (t1[k] - t0[k]) / 1e6 / seconds, 1)
            for k in ("some", "full") if k in t0 and k in t1}


def _diskstats_written(text, dev):
    """Sectors (512 B) written to block device @dev since boot: field 10 of
    its /proc/diskstats line; None when the device is not there."""
    for line in text.splitlines():
        f = line.split()
        if len(f) > 9 and f[2] == dev:
            return int(f[9])
    return None


def _meminfo_kib(text, names=("Dirty", "Writeback")):
    """Fields of /proc/meminfo in KiB: {"Dirty": kib, "Writeback": kib}."""
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k in names:
            out[k] = int(v.split()[0])
    return out


def _block_dev(path):
    """The /proc/diskstats name of the block device holding @path (its
    /sys/dev/block/MAJOR:MINOR/uevent DEVNAME), None if unknown."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    ue = _read(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/uevent")
    for line in ue.splitlines():
        if line.startswith("DEVNAME="):
            return line[8:]
    return None


def _pages_per_event(b0, b1, events):
    """(b1 - b0) bytes as 4 KiB pages per event, None if a figure is
    missing."""
    if b0 is None or b1 is None or not events:
        return None
    return round((b1 - b0) / 4096 / events, 3)


def _restore_figures(lines, start_ts=None):
    """A process's restore from its restore_done log lines (seqgate: one per
    partition, restored one after another; the Kafka Streams peer: one per
    store and changelog partition, several at once). records: the
    changelog records read (seqgate: end - log_start of each partition,
    since a restore that had to grow the map starts its last pass from its
    latest checkpoint, and its line counts that pass only; the peer: its
    totals). span: from @p start_ts (seqgate's "running" line, after which
    its restores run) or else the first line's start (its ts - ms) to the
    last line's end; records/s over it. ms_sum and records_per_s_ms_sum:
    the lines' own ms and records (the last pass of each)."""
    evs = [e for e in lines if e.get("ms") is not None and e.get("ts")]
    if not evs:
        return {}
    recs = sum(int(e["end"]) - int(e["log_start"]) if "end" in e and "log_start" in e
               else int(e.get("records", 0)) for e in evs)
    last = sum(int(e.get("records", 0)) for e in evs)
    ms = sum(max(0, int(e["ms"])) for e in evs)
    ends = [_ts(e["ts"]) for e in evs]
    starts = [t - max(0, int(e["ms"])) / 1000 for t, e in zip(ends, evs)]
    span = max(ends) - (start_ts if start_ts is not None else min(starts))
    return {"records": recs, "ms_sum": ms, "span_s": round(span, 3),
            "records_per_s": round(recs / span) if span > 0 else None,
            "records_per_s_ms_sum": round(last / (ms / 1000)) if ms > 0 else None,
            "parts": len(evs)}


def _store_bytes_by(path):
    """Allocated bytes under @path by store: a RocksDB store's files live
    under .../rocksdb/<store>/ (Kafka Streams' state.dir layout); anything
    else counts as "other"."""
    out = {}
    for root, _, files in os.walk(path):
        parts = root.split(os.sep)
        key = parts[parts.index("rocksdb") + 1] if ("rocksdb" in parts and
                                                     parts.index("rocksdb") + 1 < len(parts)) else "other"
        for fn in files:
            try:
                out[key] = out.get(key, 0) + os.stat(os.path.join(root, fn)).st_blocks * 512
            except OSError:
                pass
    return out


class _SysPoint:
    """One reading of what the --scale phase measures between two moments:
    the process's /proc/PID/io, the data device's sectors written, I/O
    pressure, the data_dir's allocated bytes."""

    def __init__(self, pid, dev, data_dir):
        self.mono = time.monotonic()
        self.io = _proc_io(_read(f"/proc/{pid}/io")) if pid else {}
        self.cpu_s = _proc_cpu_s(_read(f"/proc/{pid}/stat")) if pid else None
        self.threads = _thread_cpu(pid) if pid else {}
        self.machine = _machine_cpu_s(_read("/proc/stat"))
        self.sectors = _diskstats_written(_read("/proc/diskstats"), dev) if dev else None
        self.psi = _psi_totals(_read("/proc/pressure/io"))
        self.data_dir = _du(data_dir) if data_dir else None
        self.by_store = _store_bytes_by(data_dir) if data_dir else None


class _RssSampler:
    """Samples the resident memory of the process under test (the child of
    `/usr/bin/time`, found once it exists) every @period s from
    /proc/PID/status on a thread: the peaks of RssAnon (heap, librdkafka's
    queues, a JVM's heap, RocksDB's block cache: memory the kernel cannot
    drop), RssFile (file pages mapped in: LMDB's map, shared libraries,
    the JVM's jars: page cache the kernel reclaims under pressure) and
    VmRSS, each a maximum on its own (not necessarily at one moment).
    A sample misses a peak shorter than @period."""

    def __init__(self, parent_pid, period=0.2, data_dir=None):
        self.parent = parent_pid
        self.period = period
        self.peak = {}
        self.samples = 0
        # --scale: /proc/meminfo Dirty and Writeback (system-wide), and the
        # data_dir's allocated bytes (once a second), peaks per phase
        # ("restore" until the caller says "stream")
        self.data_dir = data_dir
        self.phase = "restore"
        self.sys_peak = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self):
        while not self._stop.is_set():
            # found again at every sample: before its exec the child is a
            # copy of `time`
            kids = _children(self.parent)
            got = _status_kib(kids[0]) if kids else {}
            if got:
                self.samples += 1
                for k, v in got.items():
                    self.peak[k] = max(self.peak.get(k, 0), v)
                sysv = _meminfo_kib(_read("/proc/meminfo"))
                if self.data_dir and self.samples % 5 == 1:
                    sysv["data_dir"] = _du(self.data_dir)
                pk = self.sys_peak.setdefault(self.phase, {})
                for k, v in sysv.items():
                    pk[k] = max(pk.get(k, 0), v)
            self._stop.wait(self.period)

    def stop(self):
        """Stops sampling; returns peak_rss_anon_kib, peak_rss_file_kib,
        peak_vmrss_sampled_kib and rss_samples (those sampled)."""
        self._stop.set()
        self._t.join()
        out = {"rss_samples": self.samples}
        for k, name in (("RssAnon", "peak_rss_anon_kib"),
                        ("RssFile", "peak_rss_file_kib"),
                        ("VmRSS", "peak_vmrss_sampled_kib")):
            if k in self.peak:
                out[name] = self.peak[k]
        if self.data_dir is not None:
            for ph, pk in self.sys_peak.items():
                out[f"peak_{ph}"] = {
                    "dirty_kib": pk.get("Dirty"), "writeback_kib": pk.get("Writeback"),
                    "data_dir_bytes": pk.get("data_dir")}
        return out


def _machine_cpu_s(text):
    """The machine's CPU seconds so far from /proc/stat's "cpu" line: busy
    (user, nice, system, irq, softirq, steal) and idle (idle, iowait), all
    processors together; None if it cannot be read."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:9]]
            tick = os.sysconf("SC_CLK_TCK")
            return {"busy": (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tick,
                    "idle": (v[3] + v[4]) / tick, "steal": v[7] / tick}
    return None


def _thread_cpu(pid):
    """CPU seconds (user+sys) of @pid's threads so far, summed by thread
    name (the kernel's 15-character comm) without trailing digits: a JVM's
    "C2 CompilerThre", "C1 CompilerThre" (JIT) and "GC Thread#" (GC),
    librdkafka's "rdk:broker" threads. Read just before SIGTERM."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                st = f.read()
        except OSError:
            continue
        # comm is in parentheses and may hold spaces; utime, stime are
        # fields 14 and 15 (1-based), i.e. 11 and 12 after the ")".
        name = st[st.index("(") + 1:st.rindex(")")]
        rest = st[st.rindex(")") + 2:].split()
        cpu = (int(rest[11]) + int(rest[12])) / tick
        key = name.rstrip("0123456789") or name
        out[key] = out.get(key, 0) + cpu
    return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])
            if v > 0}


def _schedstat_runq_s(text):
    """Seconds a thread waited in the run queue (ready, not running), from
    the text of /proc/PID/task/TID/schedstat: "<on-CPU ns> <run-queue ns>
    <time slices>". None if it cannot be read."""
    parts = text.split()
    try:
        return int(parts[1]) / 1e9
    except (IndexError, ValueError):
        return None


def _thread_runq(pid):
    """Run-queue seconds of @pid's threads so far, summed by thread name as
    in _thread_cpu: on a loaded machine, the time a thread was ready but
    another process had the CPU. A thread's wall time less its CPU and this
    is what it spent blocked (for seqgate's main thread: waiting for
    Kafka, or for a timer). Read just before SIGTERM."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                st = f.read()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                rq = _schedstat_runq_s(f.read())
        except OSError:
            continue
        if rq is None:
            continue
        name = st[st.index("(") + 1:st.rindex(")")]
        key = name.rstrip("0123456789") or name
        out[key] = out.get(key, 0) + rq
    return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])
            if v > 0}


def _interval_rates(log_path):
    """records_total per second between consecutive "stats" lines of the
    process's log (seqgate's and the peer's come every 10 s in the
    benchmark): the best one shows the rate once start-up (and a JVM's JIT
    warm-up) is behind."""
    pts = []
    try:
        with open(log_path, errors="replace") as f:
            for line in f:
                if '"event":"stats"' not in line:
                    continue
                try:
                    st = json.loads(line)
                    pts.append((_ts(st["ts"]), int(st["records_total"])))
                except (ValueError, KeyError):
                    pass
    except OSError:
        pass
    return [round((n1 - n0) / (t1 - t0)) for (t0, n0), (t1, n1) in zip(pts, pts[1:])
            if t1 - t0 >= 1]


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


def _loadavg():
    """The 1-minute load average (other work on the machine during a run)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return None


def cmd_run(a):
    load0 = _loadavg()
    mon = _plain_consumer(a.bootstrap)
    marks = _watermarks(mon, a.topic)
    end = {p: hi for p, _, hi in marks}
    total = sum(hi - lo for _, lo, hi in marks)
    tps = [TopicPartition(a.topic, p) for p in end]
    poll_c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": a.group,
                       "enable.auto.commit": False})
    # --mark-offsets (the --scale phase): the priming records end there; the
    # time the committed offsets pass them splits the run into the priming
    # pass and the measured part.
    mark = ({int(p): int(o) for p, o in json.loads(a.mark_offsets).items()}
            if a.mark_offsets else None)
    mark_at = None
    mark_committed = None
    # --ready-event (the --scale phase, a store primed through its
    # changelog): the measured part starts when the process's log holds
    # --ready-count lines of that event (seqgate: a restore_done per
    # partition; the Kafka Streams peer: running), i.e. its restore is over
    # and the stream comes next. Beside it, the system figures at that
    # moment and at the end (_SysPoint).
    dev = _block_dev(a.data_dir) if a.data_dir and a.ready_event else None
    ready = ready_ts = at_ready = None
    ready_seen = 0
    logbuf = b""
    start_pt = _SysPoint(None, dev, None) if a.ready_event else None

    log = open(a.log, "wb")
    logrd = open(a.log, "rb")
    cmd = ["/usr/bin/time", "-v", "-o", a.time_file] + a.cmd
    t_epoch = time.time()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    sampler = _RssSampler(proc.pid, data_dir=a.data_dir if a.ready_event else None)
    done_at = None
    committed_sum = 0
    while True:
        if proc.poll() is not None:
            break
        if a.ready_event and ready is None:
            logbuf += logrd.read()
            *lines, logbuf = logbuf.split(b"\n")
            for line in lines:
                if f'"event":"{a.ready_event}"'.encode() in line:
                    ready_seen += 1
                    if ready_seen == a.ready_count:
                        ready_ts = _ts(json.loads(line)["ts"])
            if ready_seen >= a.ready_count:
                kids = _children(proc.pid)
                ready = _SysPoint(kids[0] if kids else None, dev, a.data_dir)
                sampler.phase = "stream"
                if a.at_ready:
                    r = subprocess.run(a.at_ready, shell=True, capture_output=True,
                                       text=True)
                    try:
                        at_ready = json.loads(r.stdout.strip().splitlines()[-1])
                    except (ValueError, IndexError):
                        at_ready = {"exit": r.returncode, "stdout": r.stdout[-500:],
                                    "stderr": r.stderr[-500:]}
        try:
            got = poll_c.committed(tps, timeout=5)
            now = time.monotonic()
            committed_sum = sum(max(0, tp.offset) - 0 for tp in got)
            if mark and mark_at is None and all(
                    tp.offset >= mark.get(tp.partition, 0) for tp in got):
                mark_at = now
                mark_committed = sum(max(0, tp.offset) for tp in got)
            if all(tp.offset >= end[tp.partition] for tp in got):
                done_at = now
                break
        except KafkaException:
            pass
        if time.monotonic() - t0 > a.timeout:
            break
        time.sleep(a.poll_s)
    wall = (done_at - t0) if done_at else None
    # SIGTERM seqgate itself: GNU time would die of it without reporting.
    kids = _children(proc.pid)
    end_pt = (_SysPoint(kids[0] if kids else None, dev, a.data_dir)
              if a.ready_event else None)
    rss_split = _rss_split(kids[0]) if kids else {}
    rss_split.update(sampler.stop())
    threads = _thread_cpu(kids[0]) if kids else {}
    runq = _thread_runq(kids[0]) if kids else {}
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
    logrd.close()
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
        "loadavg_start": load0,
        "loadavg_end": _loadavg(),
    }
    if mark:
        # Committed offsets move a batch at a time: the batch that passed
        # the priming records' end held some of the stream too. The rate is
        # that of the records committed after the mark, over the time after
        # it (a stream of a few batches has none: then no rate).
        primed = sum(mark.values())
        res["prime_records"] = primed
        res["stream_records"] = total - primed
        if mark_at is not None:
            res["prime_s"] = round(mark_at - t0, 3)
            res["measured_records"] = total - mark_committed
        if (mark_at is not None and done_at is not None and done_at > mark_at
                and total > mark_committed):
            res["measured_wall_s"] = round(done_at - mark_at, 3)
            res["measured_events_per_s"] = round((total - mark_committed)
                                                 / (done_at - mark_at))
    if a.ready_event:
        res.update(_scale_figures(a, total, t_epoch, t0, done_at, ready_ts, start_pt,
                                  ready, end_pt, dev))
        if at_ready is not None:
            res["at_ready"] = at_ready
    for att in a.attach or []:
        name, _, path = att.partition("=")
        try:
            with open(path) as f:
                res[name] = json.loads(f.read().strip().splitlines()[-1])
        except (OSError, ValueError, IndexError) as e:
            res[name] = {"error": str(e)}
    res.update(_time_v(a.time_file))
    res.update(rss_split)
    if threads:
        res["end_thread_cpu_s"] = threads
    if runq:
        res["end_thread_runq_s"] = runq
    if a.data_dir:
        res["store_bytes"] = _du(a.data_dir)
    st = _last_stats(a.log)
    if st:
        res["final_stats"] = st
    rates = _interval_rates(a.log)
    if rates:
        res["stats_interval_rates"] = rates
    with open(a.out, "a") as f:
        f.write(json.dumps(res) + "\n")
    print(json.dumps({k: v for k, v in res.items()
                      if k not in ("final_stats", "end_thread_cpu_s",
                                    "end_thread_runq_s")}))
    if wall is None:
        sys.exit(f"measure.py: {a.label}: input not fully committed "
                 f"({committed_sum}/{total}) before exit or timeout; see {a.log}")


def _scale_figures(a, total, t_epoch, t0, done_at, ready_ts, start_pt, ready, end_pt,
                   dev):
    """cmd_run --ready-event: the restore (from the restore_done lines)
    and the stream after it: events/s over [ready, done], pages written
    per event (the process's write_bytes and the device's sectors between
    the two readings), I/O pressure, the data_dir's allocated bytes."""
    res = {"ready_s": round(ready_ts - t_epoch, 3) if ready_ts else None}
    lines, start = [], None
    try:
        with open(a.log, errors="replace") as f:
            for line in f:
                if '"event":"restore_done"' in line or (
                        start is None and '"event":"running"' in line):
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    if ev["event"] == "running":
                        start = _ts(ev["ts"])
                    else:
                        lines.append(ev)
    except OSError:
        pass
    # seqgate restores after its "running" line; the peer's comes once its
    # restores are over (its span is from the first restore's start)
    res["restore"] = _restore_figures(
        lines, start if start is not None and lines and _ts(lines[0]["ts"]) >= start
        else None)
    if ready is None or end_pt is None:
        return res
    # the window starts at the ready line's time (the log's clock, mapped
    # to this process's monotonic one); the readings were taken when the
    # line was seen, at most a poll interval later
    ready_mono = t0 + (ready_ts - t_epoch)
    if done_at is not None and done_at > ready_mono:
        res["measured_wall_s"] = round(done_at - ready_mono, 3)
        res["measured_records"] = total
        res["measured_events_per_s"] = round(total / (done_at - ready_mono))
    wb0, wb1 = ready.io.get("write_bytes"), end_pt.io.get("write_bytes")
    s0, s1 = ready.sectors, end_pt.sectors
    c0, c1 = ready.cpu_s, end_pt.cpu_s
    res["stream"] = {
        # CPU-s of the process per 1 M stream records: what the machine's
        # other load changes least (it stretches the wall time)
        "cpu_s": round(c1 - c0, 2) if c0 is not None and c1 is not None else None,
        "cpu_s_per_m": (round((c1 - c0) * 1e6 / total, 2)
                        if c0 is not None and c1 is not None and total else None),
        "write_bytes": (wb1 - wb0) if wb0 is not None and wb1 is not None else None,
        "pages_per_event": _pages_per_event(wb0, wb1, total),
        "device": dev,
        "device_pages_per_event": _pages_per_event(
            s0 * 512 if s0 is not None else None,
            s1 * 512 if s1 is not None else None, total),
        "psi_pct": _psi_pct(ready.psi, end_pt.psi, end_pt.mono - ready.mono),
        "data_dir_bytes_ready": ready.data_dir,
        "data_dir_bytes_end": end_pt.data_dir,
    }
    res["stream"]["store_bytes_by_ready"] = ready.by_store
    # where the stream's CPU went: the process's threads by name, and the
    # whole machine (the broker, the kernel's writeback, everything else)
    res["stream"]["thread_cpu_s"] = {
        k: round(v - ready.threads.get(k, 0), 2)
        for k, v in end_pt.threads.items() if v - ready.threads.get(k, 0) >= 0.01}
    if ready.machine and end_pt.machine:
        res["stream"]["machine_cpu_s"] = {
            k: round(end_pt.machine[k] - ready.machine[k], 2) for k in ready.machine}
    res["restore_phase"] = {
        "cpu_s": c0,
        "write_bytes": wb0,
        "device_bytes": ((s0 - start_pt.sectors) * 512
                         if s0 is not None and start_pt.sectors is not None else None),
        "psi_pct": _psi_pct(start_pt.psi, ready.psi, ready.mono - start_pt.mono),
    }
    return res


def _read_all(bootstrap, topic, fn, read_committed):
    """Calls fn(msg) for every data record of @topic, from the beginning up
    to the end (read_committed: the last stable offset). Returns the
    partitions' watermarks."""
    conf = {"bootstrap.servers": bootstrap,
            "group.id": f"seqgate-bench-read-{os.getpid()}-{time.time_ns()}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "enable.partition.eof": True}
    if read_committed:
        conf["isolation.level"] = "read_committed"
    c = Consumer(conf)
    marks = _watermarks(c, topic)
    c.assign([TopicPartition(topic, p, lo) for p, lo, hi in marks if hi > lo])
    remaining = {p for p, lo, hi in marks if hi > lo}
    errors = []
    while remaining:
        msgs = c.consume(10000, timeout=10)
        if not msgs:
            errors.append(f"timed out reading {topic} "
                          f"(partitions {sorted(remaining)} not at their end)")
            break
        for m in msgs:
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    remaining.discard(m.partition())
                else:
                    errors.append(str(m.error()))
                continue
            fn(m)
    c.close()
    return marks, errors


def cmd_count(a):
    out = {}
    if a.read_committed:
        for t in a.topics:
            n = [0]

            def one(_m, n=n):
                n[0] += 1
            _, errors = _read_all(a.bootstrap, t, one, True)
            if errors:
                raise SystemExit(f"measure.py: count {t}: {errors[:3]}")
            out[t] = n[0]
    else:
        c = _plain_consumer(a.bootstrap)
        out = {t: sum(hi - lo for _, lo, hi in _watermarks(c, t))
               for t in a.topics}
        c.close()
    print(json.dumps(out))


def _verify(bootstrap, topic, manifest, read_committed):
    """Reads @topic from the beginning; every aggregate's versions must
    appear exactly once each, as 1, 2, 3, ... in order (a duplicate or a
    gap shows as a version that is not last + 1)."""
    last = {}
    seen = [0]
    errors = []

    def one(m):
        seen[0] += 1
        v = None
        for k, val in m.headers() or []:
            if k == "ce_sequence":
                v = int(val)
        key = m.key()
        want = last.get(key, 0) + 1
        if v != want and len(errors) < 10:
            errors.append(f"{key!r}: version {v} after {want - 1}")
        last[key] = v if v is not None else want
    marks, rerr = _read_all(bootstrap, topic, one, read_committed)
    errors += rerr
    total = sum(hi - lo for _, lo, hi in marks)
    # read_committed: the offsets also hold the transactions' commit
    # markers, so only the records read are compared with the manifest.
    ok = (not errors and seen[0] == manifest["distinct_events"]
          and (read_committed or seen[0] == total)
          and len(last) == manifest["aggregates"])
    return {"topic": topic, "records": seen[0], "offsets": total,
            "aggregates": len(last),
            "expected_records": manifest["distinct_events"],
            "expected_aggregates": manifest["aggregates"],
            "isolation": "read_committed" if read_committed else "read_uncommitted",
            "in_order": not errors, "ok": ok, "errors": errors[:10]}


def cmd_verify(a):
    with open(a.manifest) as f:
        man = json.loads(f.read())
    res = _verify(a.bootstrap, a.topic, man, a.read_committed)
    print(json.dumps(res))
    if not res["ok"]:
        sys.exit(1)


def cmd_check(a):
    with open(a.manifest) as f:
        man = json.loads(f.read())
    distinct, dups = man["distinct_events"], man["duplicates"]
    last = [json.loads(l) for l in open(a.results) if l.strip()][-1]
    st = last.get("final_stats") or {}
    hits = st.get("dedup_hits_total", st.get("dedup_hits"))
    counts = {}
    for t in (a.out, a.dlq):
        if a.read_committed:
            n = [0]

            def one(_m, n=n):
                n[0] += 1
            _, errors = _read_all(a.bootstrap, t, one, True)
            counts[t] = n[0] if not errors else None
        else:
            c = _plain_consumer(a.bootstrap)
            counts[t] = sum(hi - lo for _, lo, hi in _watermarks(c, t))
            c.close()
    # the --scale phase's probes (bench/scale_prime.c probe): DLQ records
    # with one reason, expected; otherwise the DLQ must be empty
    want_dlq = man.get("dlq", 0)
    reasons = None
    if want_dlq:
        reasons = {}

        def one_dlq(m):
            r = dict(m.headers() or []).get("__seqgate.errors.reason", b"?")
            reasons[r.decode(errors="replace")] = reasons.get(
                r.decode(errors="replace"), 0) + 1
        _, errors = _read_all(a.bootstrap, a.dlq, one_dlq, a.read_committed)
        if errors:
            reasons = None
    ok = (counts[a.out] == distinct and counts[a.dlq] == want_dlq and hits == dups
          and (not want_dlq or reasons == {man["dlq_reason"]: want_dlq}))
    iso = "read_committed" if a.read_committed else "watermarks"
    print(f"measure.py: correctness ({last['label']}, {iso}): outputs "
          f"{counts[a.out]} (want {distinct}), DLQ {counts[a.dlq]} (want {want_dlq}"
          + (f" {man['dlq_reason']}; got {reasons}" if want_dlq else "") + "), "
          f"dedup_hits {hits} (want {dups}): {'OK' if ok else 'MISMATCH'}")
    res = {"label": last["label"], "outputs": counts[a.out],
           "dlq": counts[a.dlq], "dedup_hits": hits, "isolation": iso,
           "ok": ok}
    if reasons is not None:
        res["dlq_reasons"] = reasons
    if a.verify:
        v = _verify(a.bootstrap, a.out, man, a.read_committed)
        print(f"measure.py: order check of {a.out} ({v['isolation']}): "
              f"{v['records']} records, {v['aggregates']} aggregates, "
              f"{'each aggregate 1..n once, in order' if v['in_order'] else 'ERRORS ' + '; '.join(v['errors'])}"
              f": {'OK' if v['ok'] else 'MISMATCH'}")
        res["verify"] = v
        ok = ok and v["ok"]
        res["ok"] = ok
    with open(a.results + ".check", "a") as f:
        f.write(json.dumps(res) + "\n")
    if not ok:
        sys.exit(1)


DB_NAMES = {0: "dedup", 2: "agg", 3: "parked", 5: "meta", 6: "snapreq"}


def _store_names(topics):
    """One changelog per store (Kafka Streams' <application.id>-<store>-
    changelog): each topic named by what its name has beyond the others'."""
    if len(topics) == 1:
        return {}
    pre = os.path.commonprefix(topics)
    out = {}
    for t in topics:
        n = t[len(pre):]
        if n.endswith("-changelog"):
            n = n[:-len("-changelog")]
        out[t] = n or t
    return out


def cmd_changelog(a):
    kinds = {}
    tot = {"records": 0, "tombstones": 0, "key_bytes": 0, "value_bytes": 0,
           "header_bytes": 0}
    by_topic = _store_names(a.topic)

    def one(m):
        k = m.key() or b""
        v = m.value()
        if by_topic:
            name = by_topic[m.topic()]
        else:
            name = DB_NAMES.get(k[0], f"db{k[0]}") if k else "nokey"
        d = kinds.setdefault(name, {"records": 0, "tombstones": 0,
                                    "key_bytes": 0, "value_bytes": 0})
        for x in (d, tot):
            x["records"] += 1
            x["key_bytes"] += len(k)
            if v is None:
                x["tombstones"] += 1
            else:
                x["value_bytes"] += len(v)
        for hk, hv in m.headers() or []:
            tot["header_bytes"] += len(hk) + len(hv or b"")
    t0 = time.monotonic()
    marks, errors = [], []
    for topic in a.topic:
        m, e = _read_all(a.bootstrap, topic, one, True)
        marks += [(topic, p, lo, hi) for p, lo, hi in m]
        errors += e
    read_s = time.monotonic() - t0
    end_offsets = sum(hi for _, _, _, hi in marks)
    kv = tot["key_bytes"] + tot["value_bytes"]
    res = {"label": a.label, "topic": ",".join(a.topic), "input_events": a.events,
           **tot, "read_s": round(read_s, 2),
           "partitions": len(marks), "end_offsets": end_offsets,
           "log_start_offsets": sum(lo for _, _, lo, _ in marks),
           "kv_bytes": kv,
           "kv_bytes_per_event": round(kv / a.events, 1) if a.events else None,
           "kv_bytes_per_record": round(kv / tot["records"], 1) if tot["records"] else None,
           "records_per_event": round(tot["records"] / a.events, 3) if a.events else None,
           "by_db": kinds, "errors": errors[:5]}
    if a.log_dir:
        disk = 0
        seg = 0
        for topic, p, _, _ in marks:
            for fn in glob.glob(os.path.join(a.log_dir, f"{topic}-{p}", "*")):
                try:
                    sz = os.stat(fn).st_size
                except OSError:
                    continue
                disk += sz
                if fn.endswith(".log"):
                    seg += sz
        res["disk_source"] = "broker log dir"
        res["disk_bytes"] = disk          # .log + .index + .timeindex + ...
        res["disk_log_bytes"] = seg       # the record batches themselves
    else:
        # No access to the broker's disk: end offsets x the average record
        # (key + value + ~10 bytes of per-record framing (9.2 B measured); batch headers and
        # commit markers not counted), an estimate.
        avg = (kv + 10 * tot["records"]) / tot["records"] if tot["records"] else 0
        res["disk_source"] = "estimate: end offsets x (avg key+value + 10 B)"
        res["disk_log_bytes"] = round(end_offsets * avg)
    if a.events and res.get("disk_log_bytes") is not None:
        res["disk_log_bytes_per_event"] = round(res["disk_log_bytes"] / a.events, 1)
    with open(a.out, "a") as f:
        f.write(json.dumps(res) + "\n")
    print(json.dumps(res))
    if errors:
        sys.exit(f"measure.py: reading {res['topic']}: {errors[:3]}")


def _ts(s):
    """The log's "ts" (RFC 3339, UTC, ms) as seconds since the epoch."""
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def cmd_restore(a):
    load0 = _loadavg()
    log = open(a.log, "wb")
    cmd = ["/usr/bin/time", "-v", "-o", a.time_file] + a.cmd
    t_epoch = time.time()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    sampler = _RssSampler(proc.pid)
    done = {}
    running_ts = None  # "running": set up, about to join the group
    buf = b""
    with open(a.log, "rb") as rd:
        while len(done) < a.partitions:
            chunk = rd.read()
            if chunk:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if b'"event":"restore_done"' in line:
                        ev = json.loads(line)
                        done[(ev["topic"], ev["partition"])] = ev
                    elif b'"event":"running"' in line and running_ts is None:
                        running_ts = _ts(json.loads(line)["ts"])
                continue
            if proc.poll() is not None or time.monotonic() - t0 > a.timeout:
                break
            time.sleep(0.02)
    seen_at = time.monotonic() - t0
    time.sleep(0.3)  # let the loop log its readiness; not timed
    kids = _children(proc.pid)
    rss_split = _rss_split(kids[0]) if kids else {}
    rss_split.update(sampler.stop())
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
    log.close()
    evs = list(done.values())
    last_ts = max((_ts(e["ts"]) for e in evs), default=None)
    res = {
        "label": a.label,
        "partitions_restored": len(evs),
        "records": sum(int(e["records"]) for e in evs),
        "restore_ms_sum": sum(int(e["ms"]) for e in evs),
        "start_to_running_s": round(running_ts - t_epoch, 3) if running_ts else None,
        "start_to_restored_s": round(last_ts - t_epoch, 3) if last_ts else None,
        "detected_after_s": round(seen_at, 3),
        "per_partition": [{k: e.get(k) for k in ("partition", "log_start", "from",
                                                "end", "records", "ms")}
                          for e in sorted(evs, key=lambda e: e["partition"])],
        "complete": len(evs) >= a.partitions,
        "loadavg_start": load0,
        "loadavg_end": _loadavg(),
    }
    res.update(_time_v(a.time_file))
    res.update(rss_split)
    if a.data_dir:
        res["store_bytes"] = _du(a.data_dir)
    st = _last_stats(a.log)
    if st:
        res["final_stats"] = {k: st.get(k) for k in
                              ("restored_records_total", "restore_ms_last",
                               "store_used_bytes", "store_map_bytes") if k in st}
    with open(a.out, "a") as f:
        f.write(json.dumps(res) + "\n")
    print(json.dumps(res))
    if not res["complete"]:
        sys.exit(f"measure.py: {a.label}: {len(evs)}/{a.partitions} partitions "
                 f"restored before exit or timeout; see {a.log}")


def _wait_assigned(bootstrap, group, topic, partitions, timeout):
    """Waits until consumer group @group is Stable with all @partitions of
    @topic assigned (the process under test has joined and will fetch).
    Returns the seconds waited, or None on timeout."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            d = admin.describe_consumer_groups([group], request_timeout=5)[group].result()
            n = sum(1 for m in d.members for tp in (m.assignment.topic_partitions or [])
                    if tp.topic == topic)
            if d.state.name == "STABLE" and n >= partitions:
                return time.monotonic() - t0
        except KafkaException:
            pass
        time.sleep(0.2)
    return None


def _pcts(xs):
    """p50/p90/p99/p99.9/max (nearest rank) of @xs (ms), rounded to 0.1."""
    if not xs:
        return {}
    xs = sorted(xs)

    def q(f):
        return round(xs[min(len(xs) - 1, max(0, int(f * len(xs) + 0.5) - 1))], 1)
    return {"p50_ms": q(0.50), "p90_ms": q(0.90), "p99_ms": q(0.99),
            "p999_ms": q(0.999), "max_ms": round(xs[-1], 1),
            "mean_ms": round(sum(xs) / len(xs), 1)}


def cmd_latency(a):
    """End-to-end latency at a paced input rate: start the measuring
    consumer (TOOL consume: every output partition and input partition 0,
    read_committed), then CMD; wait until its consumer group has the
    input's partitions (and its log says it is ready), then produce
    RECORDS (gen.py --write's file) with TOOL produce at --rate. Both are
    bench/latency_tool (C, librdkafka), so that the measurement does not
    take the cores the process under test needs. Latency of an output
    record = the wall clock when the consumer's poll returned it - its
    timestamp, which is its input record's broker append time: the input
    topic has message.timestamp.type=LogAppendTime and seqgate and the peer
    copy the input record's timestamp to the output record. The consumer
    checks that record by record on partition 0 (output partition = input
    partition here): each output record's timestamp must be an append time
    of its ce_id's input records. The input records' own append -> seen
    delay (partition 0) is the measuring consumer's floor. This process
    only waits (and samples the load average once a second)."""
    load0 = _loadavg()
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    in_parts = _partitions(admin, a.input)
    cons = subprocess.Popen(
        [a.tool, "consume", "-b", a.bootstrap, "-o", a.output, "-i", a.input,
         "-n", str(a.expect), "-s", str(a.skip_frac), "-w", str(a.idle_timeout)]
        + (["-d", a.dump] if a.dump else []) + (["-r"] if a.ordered else []),
        stdout=subprocess.PIPE)
    ready = cons.stdout.readline()  # {"event":"ready"}: fetching
    if b'"ready"' not in ready:
        cons.wait()
        sys.exit(f"measure.py: latency {a.label}: the measuring consumer failed to start")

    log = open(a.log, "wb")
    t0 = time.monotonic()
    proc = subprocess.Popen(a.cmd, stdout=log, stderr=log)
    joined = _wait_assigned(a.bootstrap, a.group, a.input, len(in_parts), a.join_timeout)
    if joined is None:
        proc.terminate()
        proc.wait()
        cons.kill()
        cons.wait()
        sys.exit(f"measure.py: latency {a.label}: group {a.group} not assigned "
                 f"{a.input} within {a.join_timeout} s; see {a.log}")
    # ...and, with --ready-event, until its log says it is ready (the
    # peer: Kafka Streams RUNNING; seqgate: every partition's restore_done)
    while a.ready_event and time.monotonic() - t0 < a.join_timeout:
        try:
            with open(a.log, "rb") as f:
                n = f.read().count(f'"event":"{a.ready_event}"'.encode())
        except OSError:
            n = 0
        if n >= a.ready_count:
            break
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    ready_s = time.monotonic() - t0
    time.sleep(a.settle_s)
    with open(a.manifest, "wb") as f:
        prod = subprocess.Popen([a.tool, "produce", "-b", a.bootstrap, "-t", a.input,
                                 "-f", a.records, "-r", str(a.rate)], stdout=f)
        loads = []
        while prod.poll() is None or cons.poll() is None:
            try:
                loads.append(float(open("/proc/loadavg").read().split()[0]))
            except (OSError, ValueError):
                pass
            if proc.poll() is not None and prod.poll() is not None:
                break  # the process under test died
            time.sleep(1)
    try:
        # the process under test gone: what it wrote is there already
        out_json = cons.communicate(
            timeout=a.idle_timeout + 30 if proc.poll() is not None else None)[0]
    except subprocess.TimeoutExpired:
        cons.kill()
        out_json = cons.communicate()[0]
    proc_cpu = sum(_thread_cpu(proc.pid).values())  # before SIGTERM
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
    try:
        got = json.loads(out_json.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        sys.exit(f"measure.py: latency {a.label}: no result from the measuring consumer")
    try:
        man = json.loads(open(a.manifest).read())
    except (OSError, ValueError):
        man = {}
    res = {"label": a.label, "rate_wanted": a.rate,
           "rate_achieved": man.get("rate_achieved"),
           "producer_behind_max_ms": man.get("behind_max_ms"),
           "process_cpu_s": round(proc_cpu, 2),
           "producer_cpu_s": (round(man["user_s"] + man["sys_s"], 2)
                              if "user_s" in man else None),
           "consumer_cpu_s": round(got.pop("consumer_user_s", 0)
                                   + got.pop("consumer_sys_s", 0), 2),
           **got,
           "join_s": round(joined, 2), "ready_s": round(ready_s, 2),
           "batch_max_ms": a.batch_ms,
           "loadavg_start": load0, "loadavg_end": _loadavg(),
           "loadavg_max": max(loads) if loads else None,
           "run_s": round(time.monotonic() - t0, 1)}
    with open(a.out, "a") as f:
        f.write(json.dumps(res) + "\n")
    print(json.dumps(res))
    if (prod.returncode or not res["complete"]
            or res["out_ts_is_append_time_p0"] != res["checked_p0"]):
        sys.exit(f"measure.py: latency {a.label}: producer exit {prod.returncode}; "
                 f"{res['output_records']}/{a.expect} output records seen; "
                 f"{res['checked_p0'] - res['out_ts_is_append_time_p0']} of "
                 f"{res['checked_p0']} on partition 0 with a timestamp that is "
                 f"not their input's append time; see {a.log}")


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


LABEL_NAME = {"plain": "plain loop", "at_least_once": "seqgate at_least_once",
              "exactly_once": "seqgate exactly_once",
              "streams": "Kafka Streams exactly_once_v2",
              "seqgate": "seqgate at_least_once"}  # "seqgate": older results


def _per_event(r, x):
    """x / the run's input records (None when either is missing)."""
    n = r.get("input_records")
    return x / n if x is not None and n else None


def _ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def _jsonl(path):
    if not path or not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]


def cmd_report(a):
    runs = _jsonl(a.results)
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
            "peak_anon_kib": _median([r.get("peak_rss_anon_kib") for r in rs]),
            "cpu_s": _median([r.get("user_s", 0) + r.get("sys_s", 0) for r in rs]),
            # CPU-s (user+sys, every thread of the process) per 1 M input events
            "cpu_per_m": _median([_per_event(r, (r.get("user_s", 0) + r.get("sys_s", 0)) * 1e6)
                                  for r in rs]),
            "store_bytes": _median([r.get("store_bytes") for r in rs]),
            "store_per_event": _median([_per_event(r, r.get("store_bytes")) for r in rs]),
            "all": [r["events_per_s"] for r in rs],
            "load": [x for r in rs for x in (r.get("loadavg_start"),
                                             r.get("loadavg_end"))
                     if x is not None],
        }
    base = (med.get("plain") or {}).get("events_per_s")
    if med:
        _report_throughput(med, base)
    _report_rest(a, med, base, by)


def _report_throughput(med, base):
    print("| run | median events/s | ratio to plain | runs (events/s) | "
          "median wall s | CPU s (user+sys) | CPU s per 1 M events | peak RSS MiB | "
          "peak anonymous RSS MiB | "
          "store on disk MiB | store B/event | load avg (1 min) |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for label, m in med.items():
        st = f"{m['store_bytes'] / 2**20:.0f}" if m["store_bytes"] else "-"
        spe = f"{m['store_per_event']:.0f}" if m["store_per_event"] else "-"
        cpm = f"{m['cpu_per_m']:.1f}" if m["cpu_per_m"] is not None else "-"
        ratio = (f"{m['events_per_s'] / base:.2f}"
                 if base and m["events_per_s"] else "-")
        allv = ", ".join(str(x) for x in m["all"])
        wall = f"{m['wall_s']:.2f}" if m["wall_s"] else "-"
        anon = f"{m['peak_anon_kib'] / 1024:.0f}" if m["peak_anon_kib"] else "-"
        eps = f"{m['events_per_s']:.0f}" if m["events_per_s"] else "-"
        load = (f"{min(m['load']):.2f}–{max(m['load']):.2f}"
                if m["load"] else "-")
        print(f"| {label} | {eps} | {ratio} | {allv} | {wall} | "
              f"{m['cpu_s']:.1f} | {cpm} | {m['peak_rss_kib'] / 1024:.0f} | {anon} | "
              f"{st} | {spe} | "
              f"{load} |")


def _report_rest(a, med, base, by):
    cls = _jsonl(a.changelog)
    if cls:
        print()
        print("| changelog (run) | records | per input event | "
              "tombstones | key+value bytes | key+value B/event | "
              "key+value B/record | on disk bytes | on disk B/event | by database (records) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for c in cls:
            dbs = ", ".join(f"{k} {v['records']}" for k, v in sorted(c["by_db"].items()))
            disk = c.get("disk_log_bytes")
            src = "" if c.get("disk_source") == "broker log dir" else " (est.)"
            print(f"| {c['label']} | {c['records']} | {c['records_per_event']} | "
                  f"{c['tombstones']} | {c['kv_bytes']} | {c['kv_bytes_per_event']} | "
                  f"{c['kv_bytes_per_record']} | {disk}{src} | "
                  f"{c.get('disk_log_bytes_per_event')}{src} | {dbs} |")

    rss = _jsonl(a.restore)
    if rss:
        print()
        print("| restore | partitions | records restored | restore ms (sum of "
              "restore_done) | records/s | start → running s | start → all restored s | "
              "peak RSS MiB | peak anonymous RSS MiB | store on disk MiB |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rss:
            st = f"{r['store_bytes'] / 2**20:.0f}" if r.get("store_bytes") else "-"
            rss_m = f"{r['peak_rss_kib'] / 1024:.0f}" if r.get("peak_rss_kib") else "-"
            anon_m = (f"{r['peak_rss_anon_kib'] / 1024:.0f}"
                      if r.get("peak_rss_anon_kib") else "-")
            rate = (f"{r['records'] / (r['restore_ms_sum'] / 1000):.0f}"
                    if r["records"] and r["restore_ms_sum"] else "-")
            print(f"| {r['label']} | {r['partitions_restored']} | {r['records']} | "
                  f"{r['restore_ms_sum']} | {rate} | {r.get('start_to_running_s')} | "
                  f"{r['start_to_restored_s']} | {rss_m} | {anon_m} | {st} |")

    print()
    parts = []
    for label in ("plain", "at_least_once", "seqgate", "exactly_once", "streams"):
        m = med.get(label)
        if not m or not m["events_per_s"]:
            continue
        txt = f"{LABEL_NAME[label]}: {m['events_per_s']:.0f} ev/s"
        if label != "plain" and base:
            txt += f" (ratio {m['events_per_s'] / base:.2f})"
        parts.append(txt)
    if parts:
        print()
        print("; ".join(parts))
    st = med.get("streams")
    if st and st["events_per_s"]:
        parts = []
        for label in ("exactly_once", "at_least_once"):
            m = med.get(label)
            if not m or not m["events_per_s"]:
                continue
            parts.append(f"{label} events/s {_ratio(m['events_per_s'], st['events_per_s'])}, "
                         f"CPU per event {_ratio(m['cpu_per_m'], st['cpu_per_m'])}, "
                         f"peak RSS {_ratio(m['peak_rss_kib'], st['peak_rss_kib'])}, "
                         f"peak anonymous RSS {_ratio(m['peak_anon_kib'], st['peak_anon_kib'])}, "
                         f"store per event {_ratio(m['store_per_event'], st['store_per_event'])}")
        if parts:
            print("seqgate / Kafka Streams: " + "; ".join(parts))
    srs = by.get("streams") or []
    if srs:
        def jvm(r, pre):
            th = r.get("end_thread_cpu_s") or {}
            return sum(v for k, v in th.items() if k.startswith(pre)) if th else None
        run_s = _median([(r.get("final_stats") or {}).get("start_to_running_ms")
                         for r in srs])
        jit = _median([jvm(r, "C1 Compiler") + jvm(r, "C2 Compiler")
                       if r.get("end_thread_cpu_s") else None for r in srs])
        gc = _median([jvm(r, "GC Thread") + jvm(r, "G1 ")
                      if r.get("end_thread_cpu_s") else None for r in srs])
        print("Kafka Streams peer (medians): process start → RUNNING "
              + (f"{run_s / 1000:.1f} s" if run_s is not None else "-")
              + " (part of its wall time); JIT compiler threads "
              + (f"{jit:.1f}" if jit is not None else "-") + " CPU-s, GC threads "
              + (f"{gc:.1f}" if gc is not None else "-") + " CPU-s (part of its CPU)")
    best = []
    for label in ("plain", "at_least_once", "exactly_once", "streams"):
        b = _median([max(r["stats_interval_rates"]) if r.get("stats_interval_rates") else None
                     for r in by.get(label, [])])
        if b:
            best.append(f"{label} {b:.0f}")
    if best:
        print("fastest stats interval (records/s between two consecutive stats "
              "lines of the process, median over runs; in a run long enough, "
              "after start-up and JIT warm-up): " + ", ".join(best))
    for who, pre in (("changelog", "exactly_once"), ("streams changelog", "streams")):
        sel = [c for c in cls if c["label"].startswith(pre)]
        if not sel:
            continue
        kvs = _median([c["kv_bytes_per_event"] for c in sel])
        dks = _median([c.get("disk_log_bytes_per_event") for c in sel])
        recs = _median([c["records"] for c in sel])
        print(f"{who}: {recs:.0f} records, {kvs:.1f} bytes (key+value) per "
              f"input event, {dks:.1f} bytes per input event on disk"
              + ("" if sel[0].get("disk_source") == "broker log dir" else " (estimate)"))
    for r in rss:
        print(f"restore {r['label']}: {r['records']} records in "
              f"{r['restore_ms_sum']} ms (restore_done), "
              f"{r['start_to_restored_s']} s from process start")
    _report_latency(_jsonl(a.latency))
    _report_scale(_jsonl(a.scale), _jsonl(a.scale_disk))


def _from_ready(r):
    """The from-ready cell of a latency row: p50 / p99 (records waited)."""
    fr = r.get("from_ready")
    if fr is None:
        return "-"
    return f"{fr.get('p50_ms')} / {fr.get('p99_ms')} ({r.get('waited_for_predecessor')})"


def _report_latency(lats):
    """The --latency phase: one line per mode."""
    if not lats:
        return
    print()
    print("| latency (mode) | rate wanted / achieved ev/s | output records | "
          "measured (warm-up skipped) | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | "
          "floor p50 / p99 ms | from ready p50 / p99 ms (waited) | "
          "batch.max_ms (streams: commit.interval.ms) | "
          "output ts = input append time | CPU s: process / producer / consumer | "
          "load avg (start–end, max) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in lats:
        fl = r.get("floor") or {}
        print(f"| {r['label']} | {r['rate_wanted']:.0f} / {r.get('rate_achieved')} | "
              f"{r['output_records']} | {r['measured']} ({r['warmup_skipped']}) | "
              f"{r.get('p50_ms')} | {r.get('p90_ms')} | {r.get('p99_ms')} | "
              f"{r.get('p999_ms')} | {r.get('max_ms')} | {fl.get('p50_ms')} / "
              f"{fl.get('p99_ms')} | {_from_ready(r)} | {r.get('batch_max_ms')} | "
              f"{r['out_ts_is_append_time_p0']} of {r['checked_p0']} (partition 0) | "
              f"{r.get('process_cpu_s')} / {r.get('producer_cpu_s')} / "
              f"{r.get('consumer_cpu_s')} | "
              f"{r.get('loadavg_start')}–{r.get('loadavg_end')}, {r.get('loadavg_max')} |")
    parts = [f"{r['label']} p50 {r.get('p50_ms')} ms p99 {r.get('p99_ms')} ms "
             f"max {r.get('max_ms')} ms ({r['measured']} records at "
             f"{r.get('rate_achieved')} ev/s"
             + (f", WANTED {r['rate_wanted']:.0f}" if (r.get("rate_achieved") or 0)
                < 0.9 * r["rate_wanted"] else "") + ")" for r in lats]
    fl = _median([(r.get("floor") or {}).get("p99_ms") for r in lats])
    fl50 = _median([(r.get("floor") or {}).get("p50_ms") for r in lats])
    print("latency (input append → output visible read_committed): "
          + "; ".join(parts)
          + f"; measuring consumer's floor (input append → seen) p50 {fl50} ms "
          f"p99 {fl} ms (median over modes)")
    if any((r.get("rate_achieved") or 0) < 0.9 * r["rate_wanted"] for r in lats):
        print("latency: WARNING: the paced producer fell more than 10 % behind its rate "
              "(the machine or the broker is too busy; a lower --latency-rate)")


def _scale_derived(r):
    """The figures of one --scale run primed through its changelog (a line
    of scale.jsonl with "ready_s"): keys in the store, allocated bytes per
    key of the data_dir (state.dir) right after the restore, bytes per
    dedup record and per aggregate (seqgate: seqgatectl sizing, LMDB pages
    per entry; the peer: its RocksDB store directories per key), pages
    written per event, I/O pressure, Dirty/Writeback peaks while the stream
    ran (MiB), the restore rate."""
    pr = r.get("prime") or {}
    k, d = pr.get("aggregates"), pr.get("dedup_keys")
    st = r.get("stream") or {}
    ready_b = st.get("data_dir_bytes_ready")
    out = {"aggregates": k, "dedup_keys": d,
           "events_per_s": r.get("measured_events_per_s"),
           "cpu_s_per_m": st.get("cpu_s_per_m"),
           "bytes_per_key": round(ready_b / (k + d), 1) if ready_b and k and d else None,
           "pages_per_event": st.get("pages_per_event"),
           "device_pages_per_event": st.get("device_pages_per_event"),
           "psi_some_pct": (st.get("psi_pct") or {}).get("some"),
           "psi_full_pct": (st.get("psi_pct") or {}).get("full"),
           "restore_records_per_s": (r.get("restore") or {}).get("records_per_s"),
           "restore_records": (r.get("restore") or {}).get("records")}
    sz = r.get("at_ready") or {}
    by = st.get("store_bytes_by_ready") or {}
    if "dedup" in sz and "aggregates" in sz:
        for name, part in (("dedup", "dedup"), ("agg", "aggregates")):
            v = (sz[part] or {}).get("bytes_per_record")
            out[f"{name}_bytes_per_record"] = round(v, 1) if v is not None else None
    elif "dedup" in by and "agg" in by and k and d:
        out["dedup_bytes_per_record"] = round(by["dedup"] / d, 1)
        out["agg_bytes_per_record"] = round(by["agg"] / k, 1)
    pk = r.get("peak_stream") or {}
    for name in ("dirty", "writeback"):
        v = pk.get(f"{name}_kib")
        out[f"{name}_peak_mib"] = round(v / 1024) if v is not None else None
    return out


def _report_scale_cl(rows, disk):
    """The --scale phase primed through the changelog: per mode, the base
    store first, then the large ones, each against its mode's base."""
    print()
    print("| scale (mode) | aggregates | dedup keys | priming: changelog records, s | "
          "restore: records, records/s | stream events/s | ratio to the base store | "
          "stream CPU s per 1 M (ratio) | "
          "data_dir at ready MiB | B per key | B per dedup record / aggregate | "
          "pages written per event: process / device | I/O pressure some / full % | "
          "Dirty / Writeback peak MiB | peak RSS anonymous / file MiB | CPU s | "
          "start → restored s, whole run s | after the run: data_dir / changelog MiB | "
          "load avg |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
          "---:|---:|---:|---|")
    base, lines = {}, []

    def mib(x):
        return f"{x / 2**20:.0f}" if x else "-"
    # scale-disk.jsonl has a line per run, in the same order
    disk = list(disk) + [{}] * (len(rows) - len(disk))
    # a mode's base store: its fewest aggregates; each other run is set
    # against the base run before it (--scale-rounds: small, large, small,
    # large, ...)
    least = {}
    for r in rows:
        k = (r.get("prime") or {}).get("aggregates") or 0
        least[r["label"]] = min(k, least.get(r["label"], k))
    pairs = {}
    for r, dk in zip(rows, disk):
        f = _scale_derived(r)
        if (r.get("prime") or {}).get("aggregates") == least[r["label"]]:
            base[r["label"]] = (r, f)
        b = base.setdefault(r["label"], (r, f))
        if b[0] is not r and f["events_per_s"] and b[1]["events_per_s"]:
            pairs.setdefault((r["label"], f["aggregates"], f["dedup_keys"]), []).append(
                (f["events_per_s"] / b[1]["events_per_s"],
                 (b[1]["cpu_s_per_m"] / f["cpu_s_per_m"]
                  if f["cpu_s_per_m"] and b[1]["cpu_s_per_m"] else None)))
        ratio = "1 (base)" if b[0] is r else _ratio(f["events_per_s"], b[1]["events_per_s"])
        cpu_ratio = "" if b[0] is r else f" ({_ratio(f['cpu_s_per_m'], b[1]['cpu_s_per_m'])})"
        pr = r.get("prime") or {}
        st = r.get("stream") or {}
        cpu = (r.get("user_s") or 0) + (r.get("sys_s") or 0)
        print(f"| {r['label'][6:]} | {f['aggregates']} | {f['dedup_keys']} | "
              f"{pr.get('records')}, {pr.get('wall_s')} | "
              f"{f['restore_records']}, {f['restore_records_per_s']} | "
              f"{f['events_per_s']} | {ratio} | {f['cpu_s_per_m']}{cpu_ratio} | "
              f"{mib(st.get('data_dir_bytes_ready'))} | "
              f"{f['bytes_per_key']} | {f.get('dedup_bytes_per_record')} / "
              f"{f.get('agg_bytes_per_record')} | {f['pages_per_event']} / "
              f"{f['device_pages_per_event']} | {f['psi_some_pct']} / {f['psi_full_pct']} | "
              f"{f['dirty_peak_mib']} / {f['writeback_peak_mib']} | "
              f"{mib((r.get('peak_rss_anon_kib') or 0) * 1024)} / "
              f"{mib((r.get('peak_rss_file_kib') or 0) * 1024)} | {cpu:.1f} | "
              f"{r.get('ready_s')}, {r.get('exit_after_s')} | "
              f"{mib(dk.get('data_dir_bytes'))} / {mib(dk.get('changelog_bytes'))} | "
              f"{r.get('loadavg_start')}–{r.get('loadavg_end')} |")
        if b[0] is not r:
            lines.append(f"{r['label'][6:]} {f['aggregates']} aggregates + {f['dedup_keys']} "
                         f"keys {f['events_per_s']} ev/s vs {b[1]['aggregates']} + "
                         f"{b[1]['dedup_keys']} {b[1]['events_per_s']} ev/s (ratio {ratio}; "
                         f"CPU-s per 1 M events {f['cpu_s_per_m']} vs "
                         f"{b[1]['cpu_s_per_m']})")
    if lines:
        print("scale (stores restored from a generated changelog; events/s from the end "
              "of the restore to the end of the stream): " + "; ".join(lines))
    for (label, k, d), ps in pairs.items():
        if len(ps) < 2:
            continue
        ev = sorted(p[0] for p in ps)
        cpu = sorted(p[1] for p in ps if p[1] is not None)
        print(f"scale {label[6:]} {k} aggregates + {d} keys, {len(ps)} pairs in turn: "
              f"events/s ratio to the base run before it "
              f"{', '.join(f'{x:.2f}' for x in (p[0] for p in ps))} "
              f"(median {_median(ev):.2f}); base CPU-s per 1 M / this run's "
              f"{', '.join(f'{x:.2f}' for x in (p[1] for p in ps) if x is not None)} "
              f"(median {_median(cpu) if cpu else float('nan'):.2f})")
    for r in rows:
        st = r.get("stream") or {}
        th, mc = st.get("thread_cpu_s"), st.get("machine_cpu_s")
        if not th and not mc:
            continue
        top = ", ".join(f"{k} {v}" for k, v in sorted(
            (th or {}).items(), key=lambda kv: -kv[1])[:6])
        mach = (f"; the machine: busy {mc['busy']}, idle {mc['idle']}, steal {mc['steal']}"
                if mc else "")
        print(f"scale {r['label'][6:]} {(r.get('prime') or {}).get('aggregates')}: the "
              f"stream's CPU-s by thread: {top or '-'}{mach}")


def _report_scale(scs, disk):
    """The --scale phase: per mode, the run with the base priming and the
    one with N primed aggregates, on the same stream after them; @disk:
    what each run left on disk."""
    if not scs:
        return
    cl = [r for r in scs if "ready_s" in r]
    if cl:
        _report_scale_cl(cl, disk)
        return
    print()
    print("| scale (mode) | aggregates primed | priming pass s | stream records "
          "(measured: committed after the priming) | "
          "measured wall s | events/s | ratio to the base priming | store on disk MiB | "
          "store B per record (priming + stream) | load avg |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    base = {}
    for r in scs:
        base.setdefault(r["label"], r)
    lines = []
    for r in scs:
        b = base[r["label"]]
        eps = r.get("measured_events_per_s")
        ratio = _ratio(eps, b.get("measured_events_per_s")) if r is not b else "1 (base)"
        st = r.get("store_bytes")
        per = (st / (r["prime_records"] + r["stream_records"])
               if st and r.get("stream_records") is not None else None)
        print(f"| {r['label']} | {r['prime_records']} | {r.get('prime_s')} | "
              f"{r.get('stream_records')} ({r.get('measured_records')}) | "
              f"{r.get('measured_wall_s')} | {eps} | "
              f"{ratio} | {st / 2**20 if st else 0:.0f} | "
              f"{per if per is None else round(per)} | "
              f"{r.get('loadavg_start')}–{r.get('loadavg_end')} |")
        if r is not b:
            lines.append(f"{r['label']} {r['prime_records']} primed {eps} ev/s vs "
                         f"{b['prime_records']} primed {b.get('measured_events_per_s')} ev/s "
                         f"(ratio {ratio})")
    if lines:
        print("scale (same stream after the priming records): " + "; ".join(lines))

    def mib(b):
        return "-" if b is None else f"{b / 2**20:.0f} MiB"
    for d in disk:
        print(f"scale disk ({d['label']}, {d['prime_records']} primed + the stream): "
              f"data_dir {mib(d['data_dir_bytes'])}, input topic "
              f"{mib(d['input_topic_bytes'])}, changelog {mib(d['changelog_bytes'])} "
              "(broker log dir)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("topics")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--config", action="append", metavar="K=V",
                   help="topic-level config of every topic created (repeatable)")
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
    p.add_argument("--mark-offsets", metavar="JSON",
                   help='{"partition": offset}: where the priming records end')
    p.add_argument("--poll-s", type=float, default=0.2,
                   help="committed-offset polling interval (default 0.2 s)")
    p.add_argument("--ready-event", metavar="E",
                   help='measure from the --ready-count-th "event":"E" log line '
                        '(restore over) to the end, with the system figures')
    p.add_argument("--ready-count", type=int, default=1)
    p.add_argument("--attach", action="append", metavar="NAME=FILE",
                   help="the JSON object in FILE goes to the result as NAME")
    p.add_argument("--at-ready", metavar="CMD",
                   help="a shell command run once ready; its last stdout line "
                        "(JSON) goes to the result as at_ready")
    p.add_argument("cmd", nargs="+")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("delete-topics")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("topics", nargs="+")
    p.set_defaults(fn=cmd_delete_topics)
    p = sub.add_parser("count")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--read-committed", action="store_true")
    p.add_argument("topics", nargs="+")
    p.set_defaults(fn=cmd_count)
    p = sub.add_parser("verify")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--manifest", required=True)
    p.add_argument("--read-committed", action="store_true")
    p.set_defaults(fn=cmd_verify)
    p = sub.add_parser("check")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--dlq", required=True)
    p.add_argument("--manifest", required=True)
    p.add_argument("--results", required=True)
    p.add_argument("--read-committed", action="store_true")
    p.add_argument("--verify", action="store_true")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("changelog")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True, action="append")
    p.add_argument("--events", type=int, required=True)
    p.add_argument("--log-dir")
    p.add_argument("--out", required=True)
    p.add_argument("--label", default="changelog")
    p.set_defaults(fn=cmd_changelog)
    p = sub.add_parser("restore")
    p.add_argument("--partitions", type=int, required=True)
    p.add_argument("--label", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--time-file", required=True)
    p.add_argument("--data-dir")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("cmd", nargs="+")
    p.set_defaults(fn=cmd_restore)
    p = sub.add_parser("latency")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--expect", type=int, required=True,
                   help="output records the run must produce")
    p.add_argument("--records", required=True,
                   help="the input records: a file of bench/gen.py --write")
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--tool", required=True, help="path of build/bench/latency_tool")
    p.add_argument("--manifest", required=True,
                   help="the paced producer's result line goes here")
    p.add_argument("--label", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--batch-ms", type=int,
                   help="the mode's batch.max_ms / commit.interval.ms (reported beside p99)")
    p.add_argument("--skip-frac", type=float, default=0.1)
    p.add_argument("--dump", help="every output record's append time and latency (ms) here")
    p.add_argument("--ordered", action="store_true",
                   help="the output is in aggregate order: also the latency from "
                        "each record's ready time (its predecessor's arrival)")
    p.add_argument("--settle-s", type=float, default=1.0)
    p.add_argument("--join-timeout", type=float, default=120)
    p.add_argument("--ready-event", help='then wait for N log lines with "event":"E"')
    p.add_argument("--ready-count", type=int, default=1)
    p.add_argument("--idle-timeout", type=float, default=30)
    p.add_argument("cmd", nargs="+")
    p.set_defaults(fn=cmd_latency)
    p = sub.add_parser("report")
    p.add_argument("--results", required=True)
    p.add_argument("--changelog")
    p.add_argument("--restore")
    p.add_argument("--latency")
    p.add_argument("--scale")
    p.add_argument("--scale-disk")
    p.set_defaults(fn=cmd_report)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
