#!/usr/bin/env python3
"""tests/docs/check_links.py ROOT

Every relative link of README.md and docs/*.md resolves: the file or
directory it names exists in the tree, and an anchor (`page.md#anchor`,
`#anchor`) names a heading of that page (GitHub's slug: lower case,
punctuation dropped, spaces to hyphens, `-1`, `-2` for repeats) or an
explicit `<a name="...">`. Links inside code (fenced blocks, `spans`) are
not links. Web links (http, https, mailto) are not fetched.

Prints one line per broken link (FILE:LINE: target: why) and exits 1 when
there is any, 0 otherwise ("N links checked").
"""

import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
NAME = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def slug(title):
    """GitHub's anchor for a heading."""
    t = re.sub(r"<[^>]+>", "", title).strip().lower()
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", t)  # a link: its text
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


def lines_outside_code(text):
    """(line number, line with code spans blanked) for lines outside fences."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
            elif line.strip().startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, re.sub(r"(`+)(?:(?!\1).)+?\1", "`code`", line)


def anchors(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found, seen = set(), {}
        for _, line in lines_outside_code(text):
            for a in NAME.findall(line):
                found.add(a)
        for line in _headings(text):
            s = slug(line)
            k = seen.get(s, 0)
            seen[s] = k + 1
            found.add(s if k == 0 else f"{s}-{k}")
        cache[path] = found
    return cache[path]


def _headings(text):
    fence = None
    for line in text.split("\n"):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
            elif line.strip().startswith(fence):
                fence = None
            continue
        h = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fence is None and h:
            yield h.group(1)


def pages(root):
    out = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    out += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return out


def check(root):
    bad, count = [], 0
    for page in pages(root):
        with open(page, encoding="utf-8") as f:
            text = f.read()
        rel = os.path.relpath(page, root)
        for n, line in lines_outside_code(text):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # http:, https:, mailto:
                count += 1
                path, _, anchor = target.partition("#")
                dest = page if not path else os.path.normpath(
                    os.path.join(os.path.dirname(page), path))
                if not os.path.exists(dest):
                    bad.append(f"{rel}:{n}: {target}: no such file")
                    continue
                if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    bad.append(f"{rel}:{n}: {target}: no such anchor in "
                               f"{os.path.relpath(dest, root)}")
    return bad, count


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: check_links.py ROOT\n")
        return 2
    bad, count = check(sys.argv[1])
    for b in bad:
        print(b)
    print(f"{count} links checked, {len(bad)} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
