"""Run the seqgate daemon as a subprocess for integration tests.

`Seqgate` writes a configuration into a work directory, starts
`seqgate --config FILE` with stderr captured to a file (one file per run, so
the log of each restart can be read on its own), waits until the consumer
group assigned it partitions (the `partitions_assigned` JSON log line), and
stops it either cleanly (SIGTERM; seqgate promises exit status 0) or
abruptly (SIGKILL, a crash). Its JSON log lines and its last `stats` line can
be read back.

`make_config` builds a configuration dict in the shape of
examples/orders.json and schemas/config.schema.json for one input topic.

Nothing here decides anything about seqgate's behaviour: tests assert.
"""

from __future__ import annotations

from collections import defaultdict

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

__all__ = ["Seqgate", "make_config", "ORDER_STATE_MACHINE", "wait_until"]

# The order state machine of the seed (semantics "Summary of the seed"):
# CREATED→PAID→SHIPPED→COMPLETED, CREATED→CANCELLED, SHIPPED→RETURNING→CANCELLED.
ORDER_STATE_MACHINE = {
    "initial": "NEW",
    "states": ["NEW", "CREATED", "PAID", "SHIPPED", "COMPLETED", "CANCELLED",
               "RETURNING"],
    "transitions": [
        {"type": "order.created", "from": ["NEW"], "to": "CREATED"},
        {"type": "order.paid", "from": ["CREATED"], "to": "PAID"},
        {"type": "order.shipped", "from": ["PAID"], "to": "SHIPPED"},
        {"type": "order.completed", "from": ["SHIPPED"], "to": "COMPLETED"},
        {"type": "order.cancelled", "from": ["CREATED", "RETURNING"],
         "to": "CANCELLED"},
        {"type": "order.returning", "from": ["SHIPPED"], "to": "RETURNING"},
    ],
}


def make_config(*, bootstrap: str, group: str, instance: str, data_dir: str,
                input_topic: str, output_topic: str, dlq_topic: str,
                gap_timeout_ms: int = 30000, gap_policy: str = "dlq",
                state_machine: dict | None = None,
                snapshot: dict | None = None,
                batch_max_records: int = 1000, batch_max_ms: int = 100,
                stats_interval_ms: int = 1000,
                max_parked_per_aggregate: int | None = None,
                on_park_overflow: str | None = None,
                guarantee: str = "at_least_once") -> dict:
    """A seqgate configuration for one CloudEvents (binary mode) input topic.

    Aggregate = record key, version = ce_sequence, idempotency key = ce_source
    + ce_id, digest = SHA-256 of the whole value (no digest pointer).
    `snapshot`, when given, is the topic's "snapshot" block (snapshot refetch)
    verbatim. `max_parked_per_aggregate` and `on_park_overflow`,
    when given, go into the topic's "ordering" block (parking caps,
    semantics §4); otherwise seqgate's defaults apply. `guarantee` is
    "at_least_once" or "exactly_once" (semantics §6; the changelog topic then
    has its default name "<group>-<input_topic>-changelog").
    """
    topic = {
        "output_topic": output_topic,
        "dlq_topic": dlq_topic,
        "output_partitioning": "input",
        "envelope": {
            "format": "cloudevents",
            "id": "ce:id",
            "scope": ["ce:source"],
            "aggregate": "key",
            "version": "ce:sequence",
            "type": "ce:type",
        },
        "dedup": {"ttl_ms": 604800000},
        "ordering": {
            "mode": "strict",
            "first_version": 1,
            "stale": "dlq",
            "gap_timeout_ms": gap_timeout_ms,
            "gap_policy": gap_policy,
        },
    }
    if max_parked_per_aggregate is not None:
        topic["ordering"]["max_parked_per_aggregate"] = max_parked_per_aggregate
    if on_park_overflow is not None:
        topic["ordering"]["on_park_overflow"] = on_park_overflow
    if state_machine is not None:
        topic["state_machine"] = state_machine
    if snapshot is not None:
        topic["snapshot"] = snapshot
    return {
        "instance_id": instance,
        "data_dir": data_dir,
        "guarantee": guarantee,
        "kafka": {"bootstrap.servers": bootstrap, "group.id": group},
        # Short session: after a SIGKILL the group waits this long for the
        # dead member before the restarted one gets the partitions.
        "kafka_consumer": {"session.timeout.ms": "6000",
                           "auto.offset.reset": "earliest"},
        "kafka_producer": {"linger.ms": 5},
        "batch": {"max_records": batch_max_records, "max_ms": batch_max_ms},
        "stats_interval_ms": stats_interval_ms,
        # port 0: every run its own free port (the http_listening line says
        # which; Seqgate.http_url()), never the shared default 9464
        "http": {"address": "127.0.0.1:0"},
        "topics": {input_topic: topic},
    }


def wait_until(pred: Callable[[], bool], timeout_s: float, what: str,
               interval_s: float = 0.2, on_timeout: Callable[[], str] | None = None) -> None:
    """Polls `pred` until true; raises AssertionError naming `what` on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        if pred():
            return
        if time.monotonic() > deadline:
            extra = on_timeout() if on_timeout else ""
            raise AssertionError(f"timed out after {timeout_s}s waiting for "
                                 f"{what}{extra}")
        time.sleep(interval_s)


class Seqgate:
    """One seqgate daemon configuration in `workdir`, run any number of times.

    Each `start()` is a new process whose stderr goes to
    workdir/seqgate-run-N.log; `runs` lists those files in order.
    """

    def __init__(self, binary: str, config: dict, workdir: Path | str):
        self.binary = str(binary)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.workdir / "config.json"
        self.config = config
        self.config_path.write_text(json.dumps(config, indent=2))
        self.proc: subprocess.Popen | None = None
        self.runs: list[Path] = []
        self._err_file = None

    # -- process control ---------------------------------------------------

    def start(self, wait_assigned: bool = True, timeout_s: float = 30.0,
              extra_args: list[str] | None = None,
              preexec_fn: Callable[[], None] | None = None) -> None:
        """Starts the daemon; with `wait_assigned`, waits for the
        `partitions_assigned` log line (the consumer group gave it work).
        `preexec_fn` runs in the child before exec (e.g. a resource
        limit)."""
        assert self.proc is None or self.proc.poll() is not None, \
            "seqgate is already running"
        self._close_err()
        log = self.workdir / f"seqgate-run-{len(self.runs) + 1}.log"
        self.runs.append(log)
        self._err_file = open(log, "wb")
        self.proc = subprocess.Popen(
            [self.binary, "--config", str(self.config_path),
             *(extra_args or [])],
            stdin=subprocess.DEVNULL, stdout=self._err_file,
            stderr=self._err_file, env=dict(os.environ),
            preexec_fn=preexec_fn)
        if wait_assigned:
            self.wait_for_event("partitions_assigned", timeout_s)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout_s: float = 30.0) -> int:
        """Waits for the process to end by itself; returns its exit status."""
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"seqgate did not exit within {timeout_s}s; killed. Log tail:\n"
                + self.log_tail())
        self._close_err()
        return rc

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, then waits; returns the exit status (SIGKILL after
        `timeout_s`, which makes the test fail through the status)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout_s)

    def kill9(self) -> int:
        """SIGKILL (a crash: nothing is flushed or committed on the way out)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        rc = self.proc.wait(timeout=30)
        self._close_err()
        return rc

    def cleanup(self) -> None:
        """Kills a still-running daemon (test teardown)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._close_err()

    def _close_err(self) -> None:
        if self._err_file is not None:
            self._err_file.close()
            self._err_file = None

    # -- logs ---------------------------------------------------------------

    def log_text(self, run: int = -1) -> str:
        if not self.runs:
            return ""
        return self.runs[run].read_text(errors="replace")

    def log_lines(self, run: int = -1) -> list[dict]:
        """The run's log lines: parsed JSON objects; a line that is not JSON
        comes back as {"event": "<non-json>", "raw": line}."""
        out = []
        for line in self.log_text(run).splitlines():
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError
            except ValueError:
                obj = {"event": "<non-json>", "raw": line}
            out.append(obj)
        return out

    def events(self, name: str, run: int = -1) -> list[dict]:
        return [l for l in self.log_lines(run) if l.get("event") == name]

    def last_stats(self, run: int = -1) -> dict | None:
        """The run's last `stats` line, or None."""
        stats = self.events("stats", run)
        return stats[-1] if stats else None

    def http_url(self, path: str = "", run: int = -1,
                 timeout_s: float = 30.0) -> str:
        """http://127.0.0.1:PORT<path> of the run's HTTP endpoint (the port
        its http_listening log line names)."""
        wait_until(lambda: bool(self.events("http_listening", run)), timeout_s,
                   "http_listening", on_timeout=lambda: "\n" + self.log_tail())
        port = self.events("http_listening", run)[-1]["port"]
        return f"http://127.0.0.1:{port}{path}"

    def log_tail(self, n: int = 40, run: int = -1) -> str:
        return "\n".join(self.log_text(run).splitlines()[-n:])

    def wait_for_event(self, name: str, timeout_s: float = 30.0,
                       run: int = -1) -> dict:
        """Waits for a log line with event `name`; fails early if the
        process exits first."""
        deadline = time.monotonic() + timeout_s
        while True:
            ev = self.events(name, run)
            if ev:
                return ev[0]
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(
                    f"seqgate exited with status {self.proc.returncode} before "
                    f"logging {name!r}. Log tail:\n{self.log_tail(run=run)}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no {name!r} log line after {timeout_s}s. Log tail:\n"
                    + self.log_tail(run=run))
            time.sleep(0.1)


def with_redeliveries(recs: list, rng, rate: float, max_delay: int = 40) -> list:
    """`recs` plus, for each record with probability `rate`, an identical copy
    (a redelivery) 1..max_delay records later."""
    inserts: dict[int, list] = defaultdict(list)
    for i, r in enumerate(recs):
        if rng.random() < rate:
            inserts[min(len(recs), i + rng.randint(1, max_delay))].append(r)
    merged = []
    for i in range(len(recs) + 1):
        merged.extend(inserts.get(i, []))
        if i < len(recs):
            merged.append(recs[i])
    return merged


def interleave(per_part: dict, rng) -> list:
    """One stream from per-partition lists, chosen at random, each
    partition's order kept."""
    out = []
    idx = {p: 0 for p in per_part}
    while idx:
        p = rng.choice(sorted(idx))
        out.append(per_part[p][idx[p]])
        idx[p] += 1
        if idx[p] == len(per_part[p]):
            del idx[p]
    return out
