#!/usr/bin/env python3
"""authority.py - a reference aggregate authority for seqgate's snapshot refetch.

seqgate asks an aggregate's authority (the service that owns it and issues its
versions) for the aggregate's current version and state when a gap in its
event stream does not close in time (semantics §4 step 1, snapshot refetch). This
responder answers those questions from a JSON file of aggregate states, so the
protocol can be seen working in the demo and exercised by the integration
tests:

    {"order-1006": {"version": 4, "state": "SHIPPED", "data": {...}}, ...}

("version" is a JSON integer or a decimal string; "state" and "data" are
optional). The file is re-read whenever it changes (size, mtime or inode:
replace it atomically, e.g. write a temporary file and rename it).

Two transports, usable at the same time:

  --http HOST:PORT   GET /<prefix>/<percent-encoded aggregate id>
                     200 {"aggregate","version","state","data"}; 404 for an
                     aggregate the file does not know. Python standard
                     library only. PORT 0 picks a free port.
  --kafka BOOTSTRAP --request-topic TOPIC
                     consumes snapshot requests (schemas/snapshot-request.
                     schema.json) in a consumer group and produces each reply
                     (schemas/snapshot-reply.schema.json) to the request's
                     reply_to topic, key = aggregate id. An unknown aggregate
                     gets no reply. Needs confluent-kafka (imported only here).

Fault injection (for tests): --fail-first N (HTTP: 500 for the first N
requests; Kafka: no reply to the first N requests), --delay-ms N (answer N ms
late), --garbage (a body that is not JSON), --omit FIELD (leave FIELD out of
every reply, e.g. "version"), --require-auth VALUE (HTTP: 401 unless the
Authorization header equals VALUE).

Once listening (HTTP bound; Kafka: partitions of the request topic assigned)
it prints one JSON line on stdout, e.g.
    {"event": "listening", "http": "127.0.0.1:38211", "kafka": null}
and JSON lines on stderr: per HTTP request "http_request" when it arrives
and "http_response" with the status when answered; per Kafka request
"kafka_request" (the Authorization header is never logged). SIGTERM / SIGINT stop it with exit status 0.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["States", "Faults", "main"]


def log(event: str, **fields) -> None:
    """One JSON log line on stderr."""
    rec = {"ts": round(time.time(), 3), "event": event}
    rec.update(fields)
    sys.stderr.write(json.dumps(rec, sort_keys=False) + "\n")
    sys.stderr.flush()


class States:
    """The aggregate states file, re-read when it changes on disk."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._sig = None
        self._states: dict = {}
        self._load()

    def _signature(self):
        st = os.stat(self.path)
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _load(self) -> None:
        sig = self._signature()
        with open(self.path, encoding="utf-8") as f:
            states = json.load(f)
        if not isinstance(states, dict):
            raise ValueError(f"{self.path}: expected a JSON object "
                             "{aggregate id: {version, state, data}}")
        for agg, st in states.items():
            if not isinstance(st, dict) or "version" not in st:
                raise ValueError(f"{self.path}: {agg!r}: expected an object "
                                 "with a \"version\"")
        self._states, self._sig = states, sig
        log("states_loaded", path=self.path, aggregates=len(states))

    def get(self, aggregate: str) -> dict | None:
        """The aggregate's entry (re-reading the file if it changed), or None.
        A file that cannot be read or parsed keeps the previous contents."""
        with self._lock:
            try:
                if self._signature() != self._sig:
                    self._load()
            except (OSError, ValueError) as e:
                log("states_reload_failed", path=self.path, error=str(e))
            st = self._states.get(aggregate)
            return dict(st) if st is not None else None


class Faults:
    """Test knobs shared by both transports (thread-safe counter)."""

    def __init__(self, fail_first: int, delay_ms: int, garbage: bool,
                 omit: list[str]):
        self.fail_left = fail_first
        self.delay_ms = delay_ms
        self.garbage = garbage
        self.omit = set(omit)
        self._lock = threading.Lock()

    def take_failure(self) -> bool:
        """True for each of the first --fail-first requests."""
        with self._lock:
            if self.fail_left > 0:
                self.fail_left -= 1
                return True
            return False


def reply_body(aggregate: str, st: dict, faults: Faults,
               request_id: str | None = None) -> bytes:
    """The reply (schemas/snapshot-reply.schema.json) as bytes."""
    if faults.garbage:
        return b"this is not JSON {"
    body: dict = {}
    if request_id is not None:
        body["request_id"] = request_id
    body["aggregate"] = aggregate
    body["version"] = st["version"]
    if "state" in st:
        body["state"] = st["state"]
    if "data" in st:
        body["data"] = st["data"]
    for f in faults.omit:
        body.pop(f, None)
    return json.dumps(body).encode()


# --- HTTP ------------------------------------------------------------------

def make_http_server(addr: str, prefix: str, states: States, faults: Faults,
                     require_auth: str | None) -> ThreadingHTTPServer:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise SystemExit(f"--http: expected HOST:PORT, got {addr!r}")
    want = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"

    class Handler(BaseHTTPRequestHandler):
        server_version = "seqgate-authority/1"
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # replaced by our JSON lines
            pass

        def _send(self, status: int, body: bytes,
                  ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802 (http.server's name)
            path = urllib.parse.urlsplit(self.path).path
            if not path.startswith(want) or "/" in path[len(want):] \
                    or len(path) == len(want):
                log("http_request", path=path)
                return self._answer(None, 404, b'{"error":"not found"}',
                                    why="bad path")
            aggregate = urllib.parse.unquote(path[len(want):])
            log("http_request", aggregate=aggregate)
            if faults.delay_ms:
                time.sleep(faults.delay_ms / 1000)
            if require_auth is not None and \
                    self.headers.get("Authorization") != require_auth:
                return self._answer(aggregate, 401, b'{"error":"unauthorized"}')
            if faults.take_failure():
                return self._answer(aggregate, 500,
                                    b'{"error":"injected failure"}',
                                    why="--fail-first")
            st = states.get(aggregate)
            if st is None:
                return self._answer(aggregate, 404,
                                    b'{"error":"unknown aggregate"}')
            self._answer(aggregate, 200, reply_body(aggregate, st, faults),
                         version=st["version"])

        def _answer(self, aggregate, status: int, body: bytes, **fields):
            try:
                self._send(status, body)
                sent = True
            except (BrokenPipeError, ConnectionResetError):
                sent = False  # the client gave up (e.g. its timeout)
            log("http_response", aggregate=aggregate, status=status,
                sent=sent, **fields)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True

        def handle_error(self, request, client_address):
            log("http_error", client=str(client_address),
                error=repr(sys.exc_info()[1]))

    return Server((host, int(port)), Handler)


# --- Kafka -------------------------------------------------------------------

def run_kafka(bootstrap: str, request_topic: str, group: str, states: States,
              faults: Faults, stop: threading.Event, ready: threading.Event,
              errors: list) -> None:
    """Request/reply loop; runs until `stop` is set."""
    try:
        from confluent_kafka import Consumer, Producer  # lazily: HTTP needs none
    except ImportError as e:
        errors.append(f"--kafka needs confluent-kafka: {e}")
        ready.set()
        return
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest",
                         "enable.auto.commit": True})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "enable.idempotence": True})
    # ready (and "listening" printed) once the group assigned partitions
    consumer.subscribe([request_topic],
                       on_assign=lambda c, parts: ready.set())
    pending: list = []  # heap of (due, n, topic, key, value)
    n = 0
    try:
        while not stop.is_set():
            now = time.monotonic()
            while pending and pending[0][0] <= now:
                _, _, topic, key, value = heapq.heappop(pending)
                producer.produce(topic, key=key, value=value,
                                 headers=[("content-type",
                                           b"application/json")])
            producer.poll(0)
            wait = 0.1 if not pending else max(0.0, min(0.1, pending[0][0] - now))
            msg = consumer.poll(wait)
            if msg is None:
                continue
            if msg.error():
                log("kafka_error", error=str(msg.error()))
                continue
            try:
                req = json.loads(msg.value())
                rid, agg, reply_to = (req["request_id"], req["aggregate"],
                                      req["reply_to"])
                if not all(isinstance(x, str) for x in (rid, agg, reply_to)):
                    raise TypeError("request_id, aggregate, reply_to: strings")
            except (ValueError, TypeError, KeyError) as e:
                log("kafka_request_invalid", offset=msg.offset(), error=str(e))
                continue
            if faults.take_failure():
                log("kafka_request", request_id=rid, aggregate=agg,
                    replied=False, why="--fail-first")
                continue
            st = states.get(agg)
            if st is None:
                log("kafka_request", request_id=rid, aggregate=agg,
                    replied=False, why="unknown aggregate")
                continue
            log("kafka_request", request_id=rid, aggregate=agg, replied=True,
                version=st["version"], reply_to=reply_to)
            n += 1
            heapq.heappush(pending, (time.monotonic() + faults.delay_ms / 1000,
                                     n, reply_to, agg.encode(),
                                     reply_body(agg, st, faults, rid)))
        for _, _, topic, key, value in sorted(pending):
            producer.produce(topic, key=key, value=value)
        producer.flush(10)
    except Exception as e:  # noqa: BLE001 (reported, then the process exits 1)
        errors.append(f"kafka loop: {e!r}")
    finally:
        consumer.close()
        stop.set()
        ready.set()


# --- main --------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Reference aggregate authority for seqgate snapshot "
                    "refetch (HTTP and/or Kafka request/reply).")
    ap.add_argument("--states", required=True,
                    help="JSON file {aggregate: {version, state, data}}")
    ap.add_argument("--http", metavar="HOST:PORT",
                    help="serve GET /PREFIX/<aggregate> (port 0: any free port)")
    ap.add_argument("--prefix", default="",
                    help="HTTP path prefix before the aggregate id, e.g. "
                         "'orders' for /orders/<aggregate> (default: none)")
    ap.add_argument("--require-auth", metavar="VALUE",
                    help="HTTP: answer 401 unless Authorization == VALUE")
    ap.add_argument("--kafka", metavar="BOOTSTRAP",
                    help="answer requests over Kafka (needs confluent-kafka)")
    ap.add_argument("--request-topic", help="with --kafka: the request topic")
    ap.add_argument("--group", default="seqgate-authority",
                    help="with --kafka: consumer group id")
    ap.add_argument("--fail-first", type=int, default=0, metavar="N",
                    help="HTTP: 500 to the first N requests; Kafka: no reply")
    ap.add_argument("--delay-ms", type=int, default=0, metavar="N",
                    help="answer every request N ms late")
    ap.add_argument("--garbage", action="store_true",
                    help="reply with a body that is not JSON")
    ap.add_argument("--omit", action="append", default=[], metavar="FIELD",
                    help="leave FIELD (e.g. version) out of every reply")
    args = ap.parse_args(argv)
    if not args.http and not args.kafka:
        ap.error("give --http HOST:PORT and/or --kafka BOOTSTRAP")
    if args.kafka and not args.request_topic:
        ap.error("--kafka needs --request-topic")

    states = States(args.states)
    faults = Faults(args.fail_first, args.delay_ms, args.garbage, args.omit)
    stop = threading.Event()
    errors: list[str] = []

    def on_signal(signum, frame):
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    server = None
    threads = []
    if args.http:
        server = make_http_server(args.http, args.prefix, states, faults,
                                  args.require_auth)
        t = threading.Thread(target=server.serve_forever,
                             kwargs={"poll_interval": 0.1}, daemon=True)
        t.start()
        threads.append(t)
    if args.kafka:
        ready = threading.Event()
        t = threading.Thread(target=run_kafka, daemon=True,
                             args=(args.kafka, args.request_topic, args.group,
                                   states, faults, stop, ready, errors))
        t.start()
        threads.append(t)
        if not ready.wait(60) and not errors:
            errors.append("--kafka: no partitions of the request topic "
                          "assigned after 60 s")
    if errors:
        for e in errors:
            log("fatal", error=e)
        return 1
    http_addr = None
    if server is not None:
        host, port = server.server_address[:2]
        http_addr = f"{host}:{port}"
    print(json.dumps({"event": "listening", "http": http_addr,
                      "kafka": args.request_topic if args.kafka else None}),
          flush=True)

    while not stop.wait(0.2):
        pass
    if server is not None:
        server.shutdown()
        server.server_close()
    for t in threads:
        t.join(15)
    if errors:
        for e in errors:
            log("fatal", error=e)
        return 1
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
