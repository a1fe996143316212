"""./deploy/demo.sh shows what happened in a few readable lines (a new
user's first run): every input event in a table with what became of it (an
output place, a DLQ reason, or why it was dropped), each DLQ record's
detail, 5 to 10 labelled key metrics with their Prometheus names and where
the rest is — no dump of every counter, no unlabelled /readyz answer.

The build step prints one line, not the build's own output (a fresh
tree's ninja prints ~95 lines): the demo runs with stand-in `meson` and
`ninja` on PATH that print a build's worth of lines (the binaries are the
ones meson built: SEQGATE_BIN, SEQGATECTL_BIN) and --no-deps; a failing
build shows the build's last lines and exits 1. The table marks every
event that was parked, whatever became of it, so that the parked rows add
up to seqgate_parked_total (events parked, ever). `demo.sh --help` says
what the demo does in plain words: no project-internal words.

Skipped (77) without kcat or curl, which the demo needs.

Usage: check_demo_output.py SOURCE_ROOT SEQGATE SEQGATECTL
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def main():
    root, seqgate, seqgatectl = sys.argv[1:4]
    if not shutil.which("kcat") or not shutil.which("curl"):
        print("kcat or curl missing: the demo cannot run here")
        return 77
    demo_sh = os.path.join(root, "deploy", "demo.sh")
    problems = []
    with tempfile.TemporaryDirectory() as fake:
        # stand-ins for meson and ninja: a build's worth of output, then
        # success (or, with FAKE_BUILD_FAIL, a compiler error)
        for tool in ("meson", "ninja"):
            path = os.path.join(fake, tool)
            with open(path, "w") as f:
                f.write("#!/bin/sh\n"
                        f"for i in $(seq 95); do echo \"[$i/95] {tool} "
                        "step $i: Compiling C object lib/x.c.o\"; done\n"
                        'if [ -n "$FAKE_BUILD_FAIL" ]; then\n'
                        '  echo "../lib/x.c:1:1: error: FAKE-COMPILE-ERROR" >&2\n'
                        "  exit 1\nfi\n")
            os.chmod(path, 0o755)
        env = dict(os.environ, SEQGATE_BIN=seqgate, SEQGATECTL_BIN=seqgatectl,
                   PATH=fake + os.pathsep + os.environ["PATH"])
        r = subprocess.run([demo_sh, "--no-deps"], capture_output=True,
                           text=True, timeout=300, env=env)
        bad = subprocess.run([demo_sh, "--no-deps"], capture_output=True,
                             text=True, timeout=60,
                             env=dict(env, FAKE_BUILD_FAIL="1"))
    out = r.stdout
    if r.returncode != 0:
        problems.append(f"demo.sh exited {r.returncode}: {r.stderr[-2000:]}")
    lines = out.splitlines()
    # the build: one line, not its output; a failed build shows its end
    noise = [l for l in (r.stdout + r.stderr).splitlines()
             if "Compiling C object" in l]
    if noise:
        problems.append(f"{len(noise)} lines of build output printed, "
                        f"e.g. {noise[:2]}")
    if not any(l.startswith("built seqgate and seqgatectl") for l in lines):
        problems.append("no one-line \"built seqgate and seqgatectl\" "
                        "line")
    if bad.returncode == 0 or "FAKE-COMPILE-ERROR" not in bad.stderr \
            or "starting seqgate" in bad.stdout:
        problems.append(f"a failed build (exit {bad.returncode}) does not "
                        "stop the demo showing the build's error: "
                        f"{(bad.stdout + bad.stderr)[-1500:]}")
    # --help: plain words
    h = subprocess.run([demo_sh, "--help"], capture_output=True, text=True,
                       timeout=30)
    for word in ("seed", "the brief", "helper"):
        if re.search(rf"\b{word}\b", h.stdout, re.I):
            problems.append(f"demo.sh --help says \"{word}\", a word of "
                            "the project's own, not the reader's")
    for opt in ("--passthrough", "--no-build", "--no-deps", "--keep",
                "--tools"):
        if opt not in h.stdout:
            problems.append(f"demo.sh --help does not explain {opt}")
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
    # every parked event is marked, whatever became of it: the parked rows
    # add up to seqgate_parked_total, and the metric's label says so
    parked_rows = [l for l in lines if re.match(r"\s+\d+\s+\S+\s+v\d+\s", l)
                   and "parked" in l]
    m = [l for l in lines if re.search(r"\s(\d+)\s+seqgate_parked_total\b",
                                       l)]
    if len(m) != 1:
        problems.append(f"not one seqgate_parked_total line: {m}")
    else:
        n = int(re.search(r"\s(\d+)\s+seqgate_parked_total", m[0]).group(1))
        if n != len(parked_rows):
            problems.append(f"seqgate_parked_total says {n}, the table "
                            f"marks {len(parked_rows)} events parked: "
                            f"{m[0].strip()!r}")
        if "ever" not in m[0]:
            problems.append("the parked metric's label does not say it "
                            f"counts events parked ever: {m[0].strip()!r}")
    if not any(re.search(r"\s\d+\s+seqgate_parked_events\b", l)
               for l in lines):
        problems.append("no line of the events parked now "
                        "(seqgate_parked_events) beside the ones parked ever")
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
    # seqgatectl reads the store after seqgate stopped: its warning that
    # the store is not written is true and beside the point in a demo
    # (and its long advice names a cluster already gone)
    warned = [l for l in (r.stdout + r.stderr).splitlines()
              if l.startswith("seqgatectl: warning:")]
    if warned:
        problems.append(f"{len(warned)} seqgatectl warnings printed, e.g. "
                        f"{warned[0][:120]}")
    for p in problems:
        print("FAIL:", p)
    if problems:
        print("--- demo output ---\n" + out)
        return 1
    print(f"ok: {len(lines)} lines, {len(metrics)} key metrics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
