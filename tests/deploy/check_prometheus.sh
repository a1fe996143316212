#!/usr/bin/env bash
# tests/deploy/check_prometheus.sh RULES TESTS: the Prometheus alerting
# rules (deploy/prometheus/seqgate-alerts.yml) are valid and do what
# tests/deploy/prometheus_rules_test.yml says: `promtool check rules`, then
# `promtool test rules` (each alert fires on the series it is for, with
# its labels and annotations, and not on a healthy one beside it).
# promtool comes from tests/tools/promtool.sh (pinned, installed with go
# install if missing).
set -euo pipefail

rules=$1
tests=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
promtool=$("$here/../tools/promtool.sh")
echo "promtool: $promtool"
"$promtool" check rules "$rules"
"$promtool" test rules "$tests"
