#!/usr/bin/env python3
"""tests/deploy/check_man.py SEQGATE SEQGATECTL MANDIR

The man pages cover the binaries as they are: every long and short option
printed by `seqgate --help`, and every command of `seqgatectl --help` with
every option of its entry and of `seqgatectl COMMAND --help`, appears in
MANDIR/seqgate.1 or MANDIR/seqgatectl.1 (each command as a .SS heading);
and both pages render with groff -man -ww and man -l without a warning, and
their .TH line names the version the binaries print.
Fails (exit 1) listing everything missing: a new option or command that is
not documented is caught here.
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib  # noqa: E402


def man_words(path):
    """The page's source with roff's escapes undone where options are
    written: \\- is -, font changes dropped."""
    with open(path, encoding="utf-8") as f:
        src = f.read()
    src = "\n".join(l for l in src.splitlines() if not l.startswith('.\\"'))
    src = re.sub(r"\\f(?:[BIRP]|\(..|\[[^]]*\])", "", src)
    return src.replace("\\-", "-").replace("\\e", "\\")


def has_option(src, opt):
    return re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", src) is not None


def section_titles(src):
    return {m.group(1).strip().strip('"') for m in re.finditer(r"^\.SS (.+)$", src, re.M)}


def version_problems(path, binary):
    """The .TH footer names the version BINARY --version prints."""
    m = re.search(r'^\.TH \S+ \S+ "[^"]*" "seqgate ([^"]+)"', open(path).read(), re.M)
    out = deploylib.help_text([binary, "--version"]).split()
    have = m.group(1) if m else None
    want = out[1] if len(out) > 1 else None
    if have is None or have != want:
        return [f"{path}: .TH says version {have}, {os.path.basename(binary)} --version {want}"]
    return []


def render_problems(path):
    problems = []
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path],
                       capture_output=True, text=True)
    if p.returncode != 0 or p.stderr.strip():
        problems.append(f"{path}: groff -man -Tutf8 -ww: exit {p.returncode}: {p.stderr.strip()}")
    env = dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="0")
    p = subprocess.run(["man", "--warnings", "-l", path], capture_output=True,
                       text=True, env=env)
    if p.returncode != 0 or p.stderr.strip() or len(p.stdout) < 500:
        problems.append(f"{path}: man -l: exit {p.returncode}, {len(p.stdout)} chars, "
                        f"stderr: {p.stderr.strip()}")
    return problems


def main():
    seqgate, seqgatectl, mandir = sys.argv[1:4]
    problems = []
    checked = 0

    page = os.path.join(mandir, "seqgate.1")
    src = man_words(page)
    longs, shorts = deploylib.options(deploylib.help_text([seqgate, "--help"]))
    if "--config" not in longs:
        problems.append(f"{seqgate} --help names no --config: not the help text?")
    for opt in longs + shorts:
        checked += 1
        if not has_option(src, opt):
            problems.append(f"seqgate.1: option {opt} of `seqgate --help` is missing")
    problems += render_problems(page) + version_problems(page, seqgate)

    page = os.path.join(mandir, "seqgatectl.1")
    src = man_words(page)
    text = deploylib.help_text([seqgatectl, "--help"])
    cmds = deploylib.commands(text)
    if len(cmds) < 4:
        problems.append(f"`seqgatectl --help` lists {len(cmds)} commands: {sorted(cmds)}")
    titles = section_titles(src)
    longs, shorts = deploylib.options(text)
    for cmd, entry in cmds.items():
        checked += 1
        if cmd not in titles:
            problems.append(f"seqgatectl.1: command '{cmd}' has no .SS section")
        sub = deploylib.help_text([seqgatectl] + cmd.split() + ["--help"])
        for t in (entry, sub):
            l, s = deploylib.options(t)
            longs += l
            shorts += s
    for opt in sorted(set(longs + shorts)):
        checked += 1
        if not has_option(src, opt):
            problems.append(f"seqgatectl.1: option {opt} of seqgatectl's help is missing")
    problems += render_problems(page) + version_problems(page, seqgatectl)

    return deploylib.report("check_man", problems, f"{checked} commands and options checked")


if __name__ == "__main__":
    sys.exit(main())
