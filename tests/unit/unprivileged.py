#!/usr/bin/env python3
"""Runs a unit test binary as an unprivileged user in a container that
allows nothing: uid and gid 65534, no capabilities, no mounts and no user
namespaces (a user namespace of uids 0..65535 whose max_user_namespaces is
0, then setpriv). test_store_space's full-disk case must then fall back to
its file-size limit (RLIMIT_FSIZE) and still pass: this checks that it ran
that way ("a file-size limit instead" in its output) and passed.

Usage: unprivileged.py TEST_BINARY
Setting that up needs root (writing another namespace's uid_map): run as
another user it exits 77, which meson counts as skipped. The binary is
copied to a temporary directory every user can read, so that the build
directory's permissions do not matter.
"""
import ctypes
import os
import shutil
import sys
import tempfile

CLONE_NEWUSER = 0x10000000
NOBODY = 65534
FALLBACK = b"a file-size limit instead"


def run_unprivileged(argv, cwd):
    """Runs argv as described above; returns (exit code, output)."""
    libc = ctypes.CDLL(None, use_errno=True)
    out_r, out_w = os.pipe()
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(out_w, 1)
            os.dup2(out_w, 2)
            if libc.unshare(CLONE_NEWUSER) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")
            os.write(ready_w, b"x")
            os.read(go_r, 1)  # the maps are written
            with open("/proc/sys/user/max_user_namespaces", "w") as f:
                f.write("0")
            os.chdir(cwd)
            os.execvp("setpriv", [
                "setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
                "--"] + argv)
        except BaseException as e:  # noqa: B036 (report anything, then die)
            os.write(2, ("unprivileged.py: %s\n" % e).encode())
        os._exit(127)
    os.close(out_w)
    os.read(ready_r, 1)
    for name in ("uid_map", "gid_map"):
        with open("/proc/%d/%s" % (pid, name), "w") as f:
            f.write("0 0 %d\n" % (NOBODY + 1))
    os.write(go_w, b"x")
    out = b""
    while True:
        chunk = os.read(out_r, 65536)
        if not chunk:
            break
        out += chunk
    _, st = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(st), out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: unprivileged.py TEST_BINARY")
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("unprivileged.py: needs root and setpriv to set up the "
              "unprivileged run: skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="sg_unpriv_")
    try:
        os.chmod(tmp, 0o755)
        exe = os.path.join(tmp, os.path.basename(sys.argv[1]))
        shutil.copy2(sys.argv[1], exe)
        os.chmod(exe, 0o755)
        rc, out = run_unprivileged([exe], "/tmp")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.stdout.write(out.decode(errors="replace"))
    if rc != 0:
        print("unprivileged.py: %s exited %d" % (sys.argv[1], rc))
        return 1
    if FALLBACK not in out:
        print("unprivileged.py: the full-disk case did not fall back to "
              "the file-size limit: was the run privileged after all?")
        return 1
    print("unprivileged.py: passed as uid %d without capabilities, mounts or "
          "user namespaces" % NOBODY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
