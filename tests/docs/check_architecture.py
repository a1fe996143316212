#!/usr/bin/env python3
"""tests/docs/check_architecture.py ROOT SEQGATECTL

docs/ARCHITECTURE.md is the map, so it must name everything on it:
  - every source file of lib/ and cmd/ (*.c, *.h), by its name in
    backticks (`store_walk.c`) or its path;
  - every command `SEQGATECTL --help` lists (`inspect`, `dlq summary`: the
    command's words in backticks, or "seqgatectl COMMAND").
And `SEQGATECTL --help` must list every command of the dispatch table in
cmd/seqgatectl/main.c (`commands[]`; `dlq` there is `dlq summary` in the
help), so that the man page and completion checks of tests/deploy, which
start from the help text, see every command too.
Fails (exit 1) listing what is missing, like the man-page check of
tests/deploy: a new file or command that is not on the map is caught here.
"""

import os
import re
import subprocess
import sys


def source_files(root):
    out = []
    for top in ("lib", "cmd"):
        for d, _, names in os.walk(os.path.join(root, top)):
            out += [os.path.relpath(os.path.join(d, n), root)
                    for n in names if n.endswith((".c", ".h"))]
    return sorted(out)


def commands(seqgatectl):
    text = subprocess.run([seqgatectl, "--help"], check=True, text=True,
                          stdout=subprocess.PIPE).stdout
    block = text.split("Commands", 1)[1].split("\n\n", 1)[0]
    out = []
    for line in block.splitlines()[1:]:
        m = re.match(r"^  ([a-z]+(?: [a-z]+)?)\s{2,}\S", line) or \
            re.match(r"^  ([a-z]+ [a-z]+) \S", line)
        if m:
            out.append(m.group(1))
    return out


def dispatch_table(root):
    """The names in cmd/seqgatectl/main.c's `commands[] = { ... };`."""
    with open(os.path.join(root, "cmd", "seqgatectl", "main.c"),
              encoding="utf-8") as f:
        src = f.read()
    m = re.search(r"\bcommands\[\]\s*=\s*\{(.*?)\};", src, re.S)
    if not m:
        return []
    return re.findall(r'\{\s*"([a-z-]+)"\s*,\s*\w+\s*\}', m.group(1))


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: check_architecture.py ROOT SEQGATECTL\n")
        return 2
    root, ctl = sys.argv[1], sys.argv[2]
    with open(os.path.join(root, "docs", "ARCHITECTURE.md"),
              encoding="utf-8") as f:
        arch = f.read()
    missing = []
    files = source_files(root)
    for path in files:
        if f"`{os.path.basename(path)}`" not in arch and path not in arch:
            missing.append(f"source file {path}")
    cmds = commands(ctl)
    if not cmds:
        print("seqgatectl --help lists no command")
        return 1
    for c in cmds:
        if f"`{c}`" not in arch and f"seqgatectl {c}" not in arch:
            missing.append(f"seqgatectl command '{c}'")
    for m in missing:
        print(f"docs/ARCHITECTURE.md does not name the {m}")
    table = dispatch_table(root)
    if not table:
        print("cmd/seqgatectl/main.c: no commands[] dispatch table found")
        return 1
    listed = {c.split()[0] for c in cmds}
    unlisted = [c for c in table if c not in listed]
    for c in unlisted:
        print(f"seqgatectl --help does not list the command '{c}' of "
              f"cmd/seqgatectl/main.c's dispatch table")
    print(f"{len(files)} source files and {len(cmds)} commands checked, "
          f"{len(missing)} not on the map; {len(table)} dispatch table "
          f"entries, {len(unlisted)} not in --help")
    return 1 if missing or unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
