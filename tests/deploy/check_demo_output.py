"""./deploy/demo.sh shows what happened in a few readable lines (a new
user's first run): every input event in a table with what became of it (an
output place, a DLQ reason, or why it was dropped), each DLQ record's
detail, 5 to 10 labelled key metrics with their Prometheus names and where
the rest is — no dump of every counter, no unlabelled /readyz answer.

Runs the demo as CI does (--no-build), with the binaries as built; skipped
(77) without kcat or curl, which the demo needs.

Usage: check_demo_output.py SOURCE_ROOT SEQGATE SEQGATECTL
"""
import os
import re
import shutil
import subprocess
import sys


def main():
    root, seqgate, seqgatectl = sys.argv[1:4]
    if not shutil.which("kcat") or not shutil.which("curl"):
        print("kcat or curl missing: the demo cannot run here")
        return 77
    r = subprocess.run([os.path.join(root, "deploy", "demo.sh"), "--no-build"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, SEQGATE_BIN=seqgate,
                                SEQGATECTL_BIN=seqgatectl))
    out = r.stdout
    problems = []
    if r.returncode != 0:
        problems.append(f"demo.sh exited {r.returncode}: {r.stderr[-2000:]}")
    lines = out.splitlines()
    # every input event, by its input offset and id, in a table row that
    # says what became of it
    demo = os.path.join(root, "deploy", "demo")
    for topic, files in (("orders", ["orders.txt", "orders-late.txt"]),
                         ("ledger", ["ledger.txt"])):
        ids = []
        for f in files:
            with open(os.path.join(demo, f)) as fh:
                ids += [re.search(r'"id":"([^"]*)"', l).group(1)
                        for l in fh if l.strip()]
        for off, eid in enumerate(ids):
            row = [l for l in lines
                   if re.match(rf"\s+{off}\s+\S+\s+v\d+\s.*\s{re.escape(eid)}\s",
                               l)]
            if len(row) != 1 or not re.search(
                    r"-> \S+ #\d+|-> \S+: [a-z_]+|dropped", row[0]):
                problems.append(f"{topic} offset {off} ({eid}): no table row "
                                f"saying what became of it: {row}")
    # each DLQ record's reason with its detail
    if len([l for l in lines if re.match(r"\s+offset \d+ \(.*\) [a-z_]+: ",
                                         l)]) != 7:
        problems.append("not one detail line per DLQ record (7)")
    # 5 to 10 labelled key metrics, each with its Prometheus name
    metrics = [l for l in lines
               if re.match(r"\s+[a-z].*\s\d+\s+seqgate_[a-z_]+\b", l)]
    if not 5 <= len(metrics) <= 10:
        problems.append(f"{len(metrics)} labelled metric lines, not 5 to 10")
    if not any("/metrics" in l and "every metric" in l for l in lines):
        problems.append("no line says where every metric is (/metrics)")
    # no raw dumps: a bare JSON object (/readyz), "name = value" counter
    # lines, raw Prometheus samples
    raw = [l for l in lines if l.startswith("{")
           or re.match(r"\s+[a-z_]+(\.[a-z_]+)? = -?\d+$", l)
           or re.match(r"seqgate_[a-z_]+(\{[^}]*\})? \S+$", l)]
    if raw:
        problems.append(f"{len(raw)} raw dump lines, e.g. {raw[:3]}")
    if len(lines) > 120:
        problems.append(f"{len(lines)} lines of output, more than 120")
    for p in problems:
        print("FAIL:", p)
    if problems:
        print("--- demo output ---\n" + out)
        return 1
    print(f"ok: {len(lines)} lines, {len(metrics)} key metrics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
