"""pytest fixtures for seqgate's integration tests (a real Kafka broker).

`bootstrap` is the bootstrap address of a real Apache Kafka broker:
$KAFKA_BOOTSTRAP when set (tests/run.sh starts one and exports it, or point it
at any cluster), otherwise a broker this session starts with
deploy/kafka/kafka.sh in its own work dir and stops at the end.
`seqgate_bin` is the seqgate executable under test: $SEQGATE_BIN or
build/seqgate.

The tests run side by side (tests/run.sh: pytest-xdist, `-n N --dist
loadgroup`; docs/testing.md "Integration tests side by side") on one
broker, so each test names its own topics, groups and ports (unique_name,
http.address 127.0.0.1:0, `closed_port`). Two marks say what cannot:
    @pytest.mark.xdist_group("name")  these tests share one worker (one
        process): a module-scoped fixture that starts a broker, or state
        the tests hand on to each other
    @pytest.mark.serial  this test runs alone, after the side-by-side part:
        it looks at the whole broker, or needs a machine it does not share
        (its comment says which)
`--serial=exclude` leaves the serial tests out, `--serial=only` runs only
them (deselected, not skipped); the default runs every test in one run.
Without $KAFKA_BOOTSTRAP each xdist worker starts a broker of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import socket

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_SH = REPO_ROOT / "deploy" / "kafka" / "kafka.sh"

# Let tests `import kafkautil` whatever the rootdir / import mode.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_addoption(parser):
    parser.addoption(
        "--serial", choices=("include", "exclude", "only"), default="include",
        help="tests marked serial: run them too (include, the default), "
             "leave them out (exclude: the side-by-side run) or run only "
             "them (only: the run after it)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: runs alone, after the tests that run side by "
        "side (it looks at the whole broker or needs a machine it does not "
        "share)")


def pytest_collection_modifyitems(config, items):
    mode = config.getoption("--serial")
    if mode == "include":
        return
    keep, drop = [], []
    for item in items:
        is_serial = item.get_closest_marker("serial") is not None
        (keep if is_serial == (mode == "only") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def closed_port():
    """A loopback port nothing listens on: bound for the whole test, never
    listening, so every connection is refused and no other process (another
    test running beside this one) can take the port meanwhile. Picking a
    free port and closing it would leave it to whoever binds next."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository's top directory."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def bootstrap():
    """Bootstrap address ("host:port") of a running Kafka broker."""
    addr = os.environ.get("KAFKA_BOOTSTRAP")
    if addr:
        yield addr
        return
    workdir = tempfile.mkdtemp(prefix="seqgate-pytest-kafka.")
    env = dict(os.environ, KAFKA_WORKDIR=workdir)
    proc = subprocess.run([str(KAFKA_SH), "start"], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.fail(f"kafka.sh start failed (exit {proc.returncode}):\n"
                    f"{proc.stderr}", pytrace=False)
    addr = proc.stdout.strip().splitlines()[-1]
    try:
        yield addr
    finally:
        subprocess.run([str(KAFKA_SH), "stop"], env=env, check=False)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def seqgate_bin() -> str:
    """Path of the seqgate executable ($SEQGATE_BIN or build/seqgate)."""
    path = os.environ.get("SEQGATE_BIN") or str(REPO_ROOT / "build" / "seqgate")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"seqgate executable not found at {path}: build it "
                    f"(meson setup build && ninja -C build) or set SEQGATE_BIN",
                    pytrace=False)
    return path


@pytest.fixture(scope="session")
def seqgatectl_bin() -> str:
    """Path of the seqgatectl executable ($SEQGATECTL_BIN or build/seqgatectl)."""
    path = os.environ.get("SEQGATECTL_BIN") or str(REPO_ROOT / "build" / "seqgatectl")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"seqgatectl executable not found at {path}: build it "
                    f"(meson setup build && ninja -C build) or set SEQGATECTL_BIN",
                    pytrace=False)
    return path
