"""The harnesses' own Kafka probes against what a broker answers while a
consumer group's coordinator moves or loads (right after a broker restart).

The chaos suite's Python process once died of SIGSEGV (exit 139) right
after its broker restart. The cause: AdminClient.list_consumer_group_offsets
answered NOT_COORDINATOR makes librdkafka (the client library inside
confluent-kafka) call rd_kafka_cgrp_op() on the consumer group of a client
that has none, a NULL pointer. The probes read committed offsets through a
consumer of the group that never joins it instead
(kafkautil.CommittedOffsets), which takes the same answer as an error and
asks again.

No broker: librdkafka's mock cluster, started through the ctypes API of the
librdkafka that confluent-kafka loads, answers the group's next OffsetFetch
requests NOT_COORDINATOR. Each probe runs in a child process, so that a
crash is a failed test, not a dead pytest. tests/run.sh runs this in its
unit phase (the venv's pytest).

test_committed_offsets_survives_not_coordinator: kafkautil's reader gets
  the right offsets after three such answers, and did get them.
test_chaos_probe_survives_not_coordinator: run_chaos.Probe.committed
  (before: the child died of SIGSEGV).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# The child: a mock cluster with topic "t" (2 partitions), offset 5 of
# partition 0 committed for group "g", then NOT_COORDINATOR for the next
# ERRORS OffsetFetch requests, then PROBE's committed offsets as JSON.
CHILD = r'''
import ctypes, glob, json, os, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import confluent_kafka
from confluent_kafka import Consumer, TopicPartition

libdir = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir,
                      "confluent_kafka.libs")
found = glob.glob(os.path.join(libdir, "librdkafka*.so*"))
lib = ctypes.CDLL(found[0] if found else "librdkafka.so.1")
vp, cp = ctypes.c_void_p, ctypes.c_char_p
for name, res, args in (
        ("rd_kafka_conf_new", vp, []),
        ("rd_kafka_conf_set", ctypes.c_int, [vp, cp, cp, cp, ctypes.c_size_t]),
        ("rd_kafka_new", vp, [ctypes.c_int, vp, cp, ctypes.c_size_t]),
        ("rd_kafka_mock_cluster_new", vp, [vp, ctypes.c_int]),
        ("rd_kafka_mock_cluster_bootstraps", cp, [vp]),
        ("rd_kafka_mock_topic_create", ctypes.c_int,
         [vp, cp, ctypes.c_int, ctypes.c_int]),
        ("rd_kafka_mock_push_request_errors_array", None,
         [vp, ctypes.c_int16, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)])):
    f = getattr(lib, name)
    f.restype, f.argtypes = res, args
es = ctypes.create_string_buffer(512)
conf = lib.rd_kafka_conf_new()
lib.rd_kafka_conf_set(conf, b"log_level", b"0", es, 512)
rk = lib.rd_kafka_new(1, conf, es, 512)  # a consumer handle owns the mock
mc = lib.rd_kafka_mock_cluster_new(rk, 1)
bs = lib.rd_kafka_mock_cluster_bootstraps(mc).decode()
lib.rd_kafka_mock_topic_create(mc, b"t", 2, 1)

c = Consumer({"bootstrap.servers": bs, "group.id": "g", "log_level": 0})
c.commit(offsets=[TopicPartition("t", 0, 5)], asynchronous=False)
c.close()

OFFSET_FETCH, NOT_COORDINATOR = 9, 16
n = int(sys.argv[4])
lib.rd_kafka_mock_push_request_errors_array(
    mc, OFFSET_FETCH, n, (ctypes.c_int * n)(*[NOT_COORDINATOR] * n))
probe = sys.argv[3]
if probe == "kafkautil":
    from kafkautil import CommittedOffsets
    r = CommittedOffsets(bs, "g")
    got = r.get("t", 2, timeout_s=30)
    got["busy_answers"] = r.busy_answers
    r.close()
elif probe == "chaos":
    import run_chaos
    p = run_chaos.Probe(bs, "g")
    got = None
    for _ in range(50):  # as the suite does: a failed probe is asked again
        try:
            got = p.committed("t", 2)
            break
        except Exception as e:  # noqa: BLE001
            print("probe:", type(e).__name__, e, file=sys.stderr)
    p.close()
print(json.dumps(got))
'''


def run_child(probe: str, errors: int) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("KAFKA_BOOTSTRAP", None)
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "tests" / "integration"),
         str(HERE), probe, str(errors)],
        env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        timeout=120)


def died(p: subprocess.CompletedProcess) -> str:
    if p.returncode < 0:
        return f"the probe's process died of {signal.Signals(-p.returncode).name}"
    return f"the probe's process exited {p.returncode}"


def test_committed_offsets_survives_not_coordinator():
    p = run_child("kafkautil", 3)
    assert p.returncode == 0, f"{died(p)}:\n{p.stderr[-2000:]}"
    # the three answers reached the reader, which asked again
    assert json.loads(p.stdout.splitlines()[-1]) == \
        {"0": 5, "1": -1001, "busy_answers": 3}


def test_chaos_probe_survives_not_coordinator():
    p = run_child("chaos", 3)
    assert p.returncode == 0, f"{died(p)}:\n{p.stderr[-2000:]}"
    assert json.loads(p.stdout.splitlines()[-1]) == {"0": 5, "1": -1001}
