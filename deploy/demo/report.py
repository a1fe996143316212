#!/usr/bin/env python3
"""What deploy/demo.sh prints about a run, in a few readable lines (Python 3,
standard library only).

  report.py events TOPIC OUT_TOPIC DLQ_TOPIC CLEAN_TSV DLQ_TSV INPUT...
      One table of the input events of TOPIC, in the order produced (the
      INPUT files, KEY|VALUE lines, make offsets 0, 1, ... of its one
      partition), each with what happened to it: the output record it became
      (its position in OUT_TOPIC), its DLQ reason, or why it was dropped; then
      the snapshot records, and each DLQ record's detail. Every output and
      DLQ record names the input offset it came from (headers
      __seqgate.source, __seqgate.errors.offset), so nothing is guessed.
      CLEAN_TSV and DLQ_TSV are kcat's '%k\\t%h\\t%s' of the two topics.

  report.py metrics METRICS_FILE READYZ_FILE URL
      The key counters of a /metrics scrape (summed over topics), each with
      its label and its Prometheus name, and /readyz; URL is where the rest
      is.
"""
import json
import re
import sys

HDR = re.compile(r"(?:^|,)(content-type|__seqgate\.[a-z_.]+)=")


def headers(h):
    """kcat's "a=1,b=2" header text: values may hold commas, names are
    content-type or __seqgate.*."""
    out, marks = {}, list(HDR.finditer(h))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(h)
        out[m.group(1)] = h[m.end():end]
    return out


def records(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, h, value = line.rstrip("\n").split("\t", 2)
            yield key, headers(h), value


def event(value):
    try:
        return json.loads(value)
    except ValueError:
        return {}


def events(topic, out_topic, dlq_topic, clean_tsv, dlq_tsv, inputs):
    ins = []
    for path in inputs:
        with open(path, encoding="utf-8") as f:
            ins += [l.rstrip("\n").split("|", 1) for l in f if l.strip()]
    fate, snapshots, details = {}, [], []
    for pos, (key, h, value) in enumerate(records(clean_tsv), 1):
        if "__seqgate.snapshot" in h:
            snapshots.append((pos, key, h["__seqgate.snapshot"],
                              h.get("__seqgate.snapshot.state", "")))
            continue
        src = h.get("__seqgate.source", "").split("/")
        if len(src) == 3 and src[0] == topic:
            fate[int(src[2])] = ("out", pos)
        elif not h.get("__seqgate.source"):
            # --passthrough copies a record unchanged (no header): the
            # first input record not yet matched with its key and value
            for off, (k, v) in enumerate(ins):
                if off not in fate and (k, v) == (key, value):
                    fate[off] = ("out", pos)
                    break
    for key, h, value in records(dlq_tsv):
        if h.get("__seqgate.errors.topic") == topic:
            off = int(h["__seqgate.errors.offset"])
            fate[off] = ("dlq", h.get("__seqgate.errors.reason", "?"),
                         h.get("__seqgate.errors.detail", ""))
            ev = event(value)
            details.append((off, key, ev.get("sequence", "?"),
                            h.get("__seqgate.errors.reason", "?"),
                            h.get("__seqgate.errors.detail", "")))
    n_out = sum(1 for f in fate.values() if f[0] == "out")
    n_dlq = sum(1 for f in fate.values() if f[0] == "dlq")
    # in = out + DLQ + dropped; a snapshot record is output that came from
    # the authority, not from an input event
    snaps = (f"; and {len(snapshots)} snapshot record"
             f"{'' if len(snapshots) == 1 else 's'} from the authority to "
             f"{out_topic}" if snapshots else "")
    print(f"topic {topic}: {len(ins)} events in: {n_out} out to "
          f"{out_topic}, {n_dlq} to {dlq_topic}, "
          f"{len(ins) - len(fate)} dropped{snaps}")
    print(f"  {'off':>3}  {'key':<11} {'ver':<4} {'type':<17} {'id':<10}  "
          f"what happened")
    seen = {}
    for off, (key, value) in enumerate(ins):
        ev = event(value)
        ver = str(ev.get("sequence", "?"))
        typ = str(ev.get("type", "?"))
        eid = str(ev.get("id", "?"))
        if "epoch" in ev:
            typ = f"{typ} e{ev['epoch']}"
        f = fate.get(off)
        if f and f[0] == "out":
            what = f"-> {out_topic} #{f[1]}"
            # a lower version of the key that came later and went out
            # first: this one was parked until it came
            later = [o for o in range(off + 1, len(ins))
                     if ins[o][0] == key and fate.get(o, ("",))[0] == "out"
                     and fate[o][1] < f[1]]
            snap = [p for p, k, sv, _ in snapshots
                    if k == key and p < f[1] and sv.isdigit()
                    and ver.isdigit() and int(sv) < int(ver)]
            if later:
                v = event(ins[later[0]][1]).get("sequence", "?")
                what += f" (parked until v{v} came)"
            elif snap:
                what += " (parked until the snapshot came)"
        elif f:
            what = f"-> {dlq_topic}: {f[1]}"
            # reasons only a parked event gets (semantics §4, §4b): its
            # gap's deadline passed, or its epoch ended while it waited
            if f[1] == "gap_timeout":
                what += " (parked until its gap timed out)"
            elif f[1] == "fenced_epoch" and "moved to epoch" in f[2]:
                what += " (parked until its epoch ended)"
        elif (ev.get("source"), eid) in seen:
            what = f"dropped: a retry of offset {seen[(ev.get('source'), eid)]}" \
                   " (same id, same data)"
        elif any(k == key and int(s) >= int(ver or 0)
                 for _, k, s, _ in snapshots if ver.isdigit()):
            # a parked event at or below the snapshot's version
            # (snapshot_superseded_total)
            what = "dropped: parked, then the snapshot covered it"
        else:
            what = "dropped"
        seen.setdefault((ev.get("source"), eid), off)
        print(f"  {off:>3}  {key:<11} v{ver:<3} {typ:<17} {eid:<10}  {what}")
    for pos, key, ver, state in snapshots:
        print(f"       {key:<11} S{ver:<3} {'snapshot ' + state:<17} "
              f"{'':<10}  -> {out_topic} #{pos} (from the authority)")
    if details:
        print(f"  why, as each {dlq_topic} record's "
              f"__seqgate.errors.detail says:")
        for off, key, ver, reason, detail in sorted(details):
            print(f"    offset {off} ({key} v{ver}) {reason}: {detail}")


KEY_METRICS = [
    ("events read", "seqgate_records_total"),
    ("applied to the output, in version order", "seqgate_applied_total"),
    ("duplicates dropped", "seqgate_dedup_hits_total"),
    ("parked ever (rows marked parked above)", "seqgate_parked_total"),
    ("parked now, still waiting", "seqgate_parked_events"),
    ("gaps that timed out", "seqgate_gap_timeouts_total"),
    ("snapshots applied from the authority",
     "seqgate_snapshot_applied_total"),
    ("dead-lettered", "seqgate_dlq_records_total"),
    ("aggregates quarantined now", "seqgate_quarantined_aggregates"),
    ("consumer lag (records not yet processed)", "seqgate_consumer_lag"),
]
SAMPLE = re.compile(r"^([a-z_:]+)(\{[^}]*\})?\s+(\S+)$")


def metrics(metrics_file, readyz_file, url):
    sums, by_reason = {}, {}
    with open(metrics_file, encoding="utf-8") as f:
        for line in f:
            m = SAMPLE.match(line.strip())
            if not m:
                continue
            name, labels, v = m.group(1), m.group(2) or "", float(m.group(3))
            sums[name] = sums.get(name, 0) + v
            r = re.search(r'reason="([^"]*)"', labels)
            if name == "seqgate_dlq_records_total" and r and v:
                by_reason[r.group(1)] = by_reason.get(r.group(1), 0) + v
    for label, name in KEY_METRICS:
        if name not in sums:
            print(f"  {label:<42} (not in /metrics)   {name}")
            continue
        extra = ""
        if name == "seqgate_dlq_records_total" and by_reason:
            extra = " (" + ", ".join(f"{r} {int(n)}"
                                     for r, n in by_reason.items()) + ")"
        print(f"  {label:<42} {int(sums[name]):>4}   {name}{extra}")
    try:
        with open(readyz_file, encoding="utf-8") as f:
            ready = json.load(f)
        print(f"  {'ready (GET /readyz)':<42} {ready.get('status', '?'):>4}"
              f"   {ready.get('partitions', '?')} partition(s) assigned")
    except (OSError, ValueError):
        print(f"  {'ready (GET /readyz)':<42} no answer")
    print(f"  every metric: {url} while seqgate runs (docs/metrics.md);")
    print("  its stats log line carries the same counters")


def main():
    if len(sys.argv) >= 8 and sys.argv[1] == "events":
        events(*sys.argv[2:7], sys.argv[7:])
    elif len(sys.argv) == 5 and sys.argv[1] == "metrics":
        metrics(*sys.argv[2:5])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
