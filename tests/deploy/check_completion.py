#!/usr/bin/env python3
"""tests/deploy/check_completion.py SEQGATECTL COMPLETION

The bash completion file COMPLETION, sourced in a bash without the
bash-completion package: `complete -p seqgatectl` names its function;
completing `seqgatectl r` offers exactly `release replay`; every command
`SEQGATECTL --help` lists is offered after `seqgatectl `, and every option
of its help entry and of `SEQGATECTL COMMAND --help` after
`seqgatectl COMMAND -`. Exit 1 listing what is missing.
"""

import os
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib  # noqa: E402


def bash(completion, script):
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                        f"source {shlex.quote(completion)} || exit 3\n{script}"],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0 or p.stderr.strip():
        raise SystemExit(f"check_completion: bash exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def complete(completion, words):
    """COMPREPLY for the command line WORDS (the last is the one completed)."""
    arr = " ".join(shlex.quote(w) for w in words)
    out = bash(completion, f"COMP_WORDS=({arr}); COMP_CWORD={len(words) - 1}\n"
                           f"_seqgatectl; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    return [l for l in out.splitlines() if l]


def main():
    seqgatectl, completion = sys.argv[1:3]
    problems = []

    spec = bash(completion, "complete -p seqgatectl").strip()
    if spec != "complete -F _seqgatectl seqgatectl":
        problems.append(f"complete -p seqgatectl: {spec!r}")

    got = sorted(complete(completion, ["seqgatectl", "r"]))
    if got != ["release", "replay"]:
        problems.append(f"seqgatectl r<TAB>: {got}, want ['release', 'replay']")

    text = deploylib.help_text([seqgatectl, "--help"])
    cmds = deploylib.commands(text)
    if len(cmds) < 4:
        problems.append(f"`seqgatectl --help` lists {len(cmds)} commands: {sorted(cmds)}")
    checked = 0
    top = complete(completion, ["seqgatectl", ""])
    for cmd, entry in cmds.items():
        words = cmd.split()
        checked += 1
        if words[0] not in top:
            problems.append(f"command '{words[0]}' not offered after 'seqgatectl '")
        if len(words) == 2 and words[1] not in complete(completion, ["seqgatectl", words[0], ""]):
            problems.append(f"command '{cmd}' not offered after 'seqgatectl {words[0]} '")
        offered = set(complete(completion, ["seqgatectl"] + words + ["-"]))
        sub = deploylib.help_text([seqgatectl] + words + ["--help"])
        # a COMMAND --help that prints the whole help: only COMMAND's entry
        sub = deploylib.commands(sub).get(cmd, sub)
        wanted = set()
        for t in (entry, sub):
            longs, shorts = deploylib.options(t)
            wanted.update(longs + shorts)
        # -h is offered as --help; -c as --config; -V, --version only
        # before a command (release's --version takes a value)
        wanted -= {"-h", "-c", "-V"}
        if cmd != "release":
            wanted.discard("--version")
        for opt in sorted(wanted):
            checked += 1
            if opt not in offered:
                problems.append(f"option {opt} not offered after 'seqgatectl {cmd} -'")

    # --reason offers exactly the reasons seqgatectl accepts (its usage
    # error for an unknown one lists them)
    p = subprocess.run([seqgatectl, "replay", "--config", "/dev/null", "--dlq",
                        "x", "--reason", "no-such-reason"],
                       capture_output=True, text=True, timeout=30)
    listed = p.stderr.split("(one of: ", 1)[-1].split(")", 1)[0]
    accepted = {r.strip() for r in listed.split(",") if r.strip()}
    if p.returncode != 2 or len(accepted) < 5:
        problems.append(f"replay --reason no-such-reason: exit {p.returncode}, "
                        f"no list of reasons: {p.stderr.strip()!r}")
    offered = set(complete(completion, ["seqgatectl", "replay", "--reason", ""]))
    for r in sorted(accepted ^ offered):
        checked += 1
        problems.append(f"reason {r}: " + ("accepted by replay --reason, not offered"
                                           if r in accepted else
                                           "offered after --reason, not a reason"))
    checked += len(accepted)

    return deploylib.report("check_completion", problems, f"{checked} commands and options checked")


if __name__ == "__main__":
    sys.exit(main())
