#!/usr/bin/env bash
# tests/chaos/run.sh: run seqgate's chaos suite with the test venv.
#
# Sets up the Python venv with tests/install-deps.sh (its last stdout line is
# the venv's python) and runs tests/chaos/run_chaos.py with the given flags:
#   --seed N                          reproduce a run (the seed is printed)
#   --mode exactly_once|at_least_once seqgate's guarantee (default exactly_once)
#   --soak                            10x the events, 30 kill cycles
#   --quick                           half the events, 30 s of stream, 5 kills
#   --instances 1|2|3                 instances that run throughout (default 2)
#   --standbys N                      standby_replicas N (<= instances - 1); one
#                                     kill is a failover past the session
#                                     timeout; fails unless a standby served a
#                                     partition move
#   --keep                            keep the temp dir (logs, data dirs)
# The suite starts its own private broker (deploy/kafka/kafka.sh with a
# private KAFKA_WORKDIR) because it restarts it; with KAFKA_BOOTSTRAP set it
# uses that cluster instead and skips the broker restart.
# Environment: SEQGATE_BIN (default build/seqgate), SG_VENV (venv dir).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=$("$ROOT/tests/install-deps.sh" | tail -n 1)
[[ -x $PY ]] || { echo "chaos/run.sh: no venv python from install-deps.sh" >&2; exit 2; }
exec "$PY" "$ROOT/tests/chaos/run_chaos.py" "$@"
