#!/usr/bin/env bash
# tests/tools/promtool.sh: prints the path of promtool, Prometheus's rules
# checker, at the version pinned below; installs it with `go install` from
# the Go module proxy when it is not there yet (tests/install-deps.sh calls
# this, so CI has it before the tests; tests/deploy/check_prometheus.sh
# calls it again and finds it).
#
# The binary goes to $SG_TOOLS_DIR/promtool-<version>/promtool (default
# ${XDG_CACHE_HOME:-~/.cache}/seqgate/tools): outside the work tree, so a
# fresh clone on the same machine reuses it, and versioned, so a new pin
# installs anew. $PROMTOOL, when set, is used as it is.
#
# The version: the Prometheus module's v0.316.0 (Prometheus 3.16.0). Go
# refuses `go install pkg@version` for a module whose go.mod has replace
# or exclude directives, which many Prometheus releases have; this one has
# neither. It needs Go 1.26.7 or later (go.mod), which this project's
# machines have (`go version`; Go 1.21 and later fetch a newer toolchain
# themselves when GOTOOLCHAIN allows it).
#
# Exit 0 with the path on stdout; 1 when Go is missing or the install
# failed (the reason on stderr).
set -euo pipefail

VERSION=v0.316.0
MODULE=github.com/prometheus/prometheus/cmd/promtool

if [[ -n ${PROMTOOL:-} ]]; then
    echo "$PROMTOOL"
    exit 0
fi
dir=${SG_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/seqgate/tools}/promtool-$VERSION
if [[ -x $dir/promtool ]]; then
    echo "$dir/promtool"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "promtool.sh: no promtool at $dir and no go to install it with" \
        "(install Go 1.26.7+, or set PROMTOOL)" >&2
    exit 1
fi
echo "promtool.sh: installing $MODULE@$VERSION into $dir ($(go version))" >&2
mkdir -p "$dir"
if ! GOBIN=$dir go install "$MODULE@$VERSION" >&2; then
    echo "promtool.sh: go install $MODULE@$VERSION failed" >&2
    exit 1
fi
echo "$dir/promtool"
