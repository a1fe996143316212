#!/usr/bin/env python3
"""check_cases.py SOURCE CASE...: every Check test case SOURCE creates
(tcase_create("name")) is one of the CASEs meson runs it as (one meson test
per case, CK_RUN_CASE), and every CASE exists, so that a case added to
SOURCE cannot go unrun."""
import re
import sys


def main() -> int:
    src, want = sys.argv[1], set(sys.argv[2:])
    with open(src, encoding="utf-8") as f:
        have = set(re.findall(r'tcase_create\("([^"]+)"\)', f.read()))
    ok = True
    for c in sorted(have - want):
        print(f"{src}: case {c!r} is not run: add it to the list in "
              "tests/unit/meson.build")
        ok = False
    for c in sorted(want - have):
        print(f"{src}: meson runs case {c!r}, which the file does not create")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
