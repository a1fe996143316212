"""What the tests/deploy checks share: what a binary's --help says (its
commands and options: the man page check and the shell completion check
read the help text the same way) and how a check reports.
"""

import re
import subprocess

# "--config", "--dlq-partition"; not "---" or a "--" alone
LONG_OPT = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?![\w-])")
# "-c", "-X"; not "-1" or the "-" of "at-least"
SHORT_OPT = re.compile(r"(?<![\w-])-[A-Za-z](?![\w-])")
# a command line of the "Commands:" block: two spaces, the name (one or two
# words: "dlq summary"), then its options or the end of the line
COMMAND_LINE = re.compile(r"^  ([a-z][\w-]*(?: [a-z][\w-]*)?)(?=\s|$)")


def help_text(argv):
    """stdout + stderr of ARGV (--help prints to stdout; some usage texts go
    to stderr); the exit status is not checked: a usage text may exit 2."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return p.stdout + p.stderr


def options(text):
    """The long and short options TEXT names, as two sorted lists."""
    return sorted(set(LONG_OPT.findall(text))), sorted(set(SHORT_OPT.findall(text)))


def commands(text):
    """Each command of the "Commands:" block of TEXT with the text of its
    entry (up to the next command or the end of the block), in order."""
    out = {}
    current = None
    in_block = False
    for line in text.splitlines():
        # "Commands:" or "Commands (seqgatectl COMMAND --help says more):"
        if re.match(r"commands\b.*:$", line.strip().lower()):
            in_block = True
            continue
        if not in_block:
            continue
        if line and not line.startswith(" "):
            break  # the block ends at the next unindented line
        m = COMMAND_LINE.match(line)
        if m:
            current = m.group(1)
            out[current] = line[m.end():]
        elif current is not None:
            out[current] += "\n" + line
    return out


def report(tool, problems, summary):
    """Print each problem and SUMMARY (prefixed "TOOL: "), then the count;
    the exit status: 1 if there are problems, else 0."""
    for p in problems:
        print(f"{tool}: {p}")
    print(f"{tool}: {summary}{', ' if summary else ''}{len(problems)} problems")
    return 1 if problems else 0
