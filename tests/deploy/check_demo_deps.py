"""deploy/demo.sh installs what the demo needs and nothing of the test
suite's toolchain: tests/install-deps.sh --demo --list must name the Debian
package of every dependency meson.build requires (a fresh machine could not
build otherwise), kcat and python3 (the demo feeds and checks with them), and
none of the packages only the tests use (the broker's Maven and JDK, clang,
the browser, the venv); demo.sh must call it with --demo.

Usage: check_demo_deps.py SOURCE_ROOT
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_dockerfile  # noqa: E402  (build_dev_packages: meson -> package)

TEST_ONLY = {"maven", "default-jdk-headless", "chromium", "clang",
             "clang-format", "python3-venv", "python3-pip", "lmdb-utils"}


def main():
    root = sys.argv[1]
    problems = []
    out = subprocess.run([os.path.join(root, "tests", "install-deps.sh"),
                          "--demo", "--list"], capture_output=True, text=True,
                         check=True).stdout.split()
    demo = set(out)
    for name, pkg in sorted(check_dockerfile.build_dev_packages(root).items()):
        if pkg not in demo:
            problems.append(f"--demo lacks {pkg} (meson dependency {name})")
    problems += [f"--demo lacks {p}" for p in ("kcat", "python3", "check")
                 if p not in demo]
    problems += [f"--demo installs {p}, which only the tests use"
                 for p in sorted(demo & TEST_ONLY)]
    problems += check_dockerfile.problems
    script = open(os.path.join(root, "deploy", "demo.sh")).read()
    if "install-deps.sh\" --demo" not in script:
        problems.append("deploy/demo.sh does not call tests/install-deps.sh --demo")
    full = set(subprocess.run([os.path.join(root, "tests", "install-deps.sh"),
                               "--list"], capture_output=True, text=True,
                              check=True).stdout.split())
    if not TEST_ONLY & full:
        problems.append("tests/install-deps.sh --list names no test-only "
                        "package: TEST_ONLY is stale")
    for p in problems:
        print(f"check_demo_deps: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_demo_deps: ok ({len(demo)} packages: {' '.join(out)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
