#!/usr/bin/env bash
# tests/install-deps.sh: install everything seqgate's build and tests need,
# on Debian (bookworm or later), idempotently.
#
#  1. Debian packages (compiler, meson, librdkafka, LMDB, cJSON, yajl, libyaml, Check,
#     OpenSSL, libcurl, libmicrohttpd for the unit tests' HTTP server, clang
#     and its libFuzzer runtime for tests/fuzz, kcat, Maven + JDK for the real
#     Kafka broker, Python). Only the missing ones are installed:
#     `apt-get update` runs once, and only when something is missing. As
#     root directly, otherwise through sudo.
#  2. A Python venv (default build/venv, or $SG_VENV) with
#     tests/integration/requirements.txt, installed only when the
#     requirements file changed since the last install.
#  3. promtool, Prometheus's rules checker, at the version
#     tests/tools/promtool.sh pins (go install, once per machine).
#
# Prints the venv's python path as its last line on stdout; everything else
# goes to stderr.
#
# Usage: tests/install-deps.sh [--scan-build] [--deb] [--demo] [--list]
#   --demo        only what deploy/demo.sh needs: the packages that build
#                 seqgate and seqgatectl (with the unit tests' Check, so that
#                 build/ stays usable by tests/run.sh), kcat and python3; no
#                 broker toolchain (Maven, JDK), no clang, no browser, no
#                 venv, no promtool. Prints python3's path as its last line.
#   --list        print the Debian packages it would check, one a line, and
#                 exit without installing anything
#   --scan-build  also clang-tools (scan-build, clang's static analyzer),
#                 for tests/run.sh --scan-build
#   --deb         also debhelper and lintian (dpkg-dev comes with
#                 build-essential), for tests/deploy/check_deb.sh, the
#                 Debian package phase of tests/run.sh --deb (lintian pulls
#                 in some 60 MB of Perl modules: only when that phase runs)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${SG_VENV:-$ROOT/build/venv}
REQS=$ROOT/tests/integration/requirements.txt

PKGS=(build-essential meson ninja-build pkg-config librdkafka-dev liblmdb-dev
    libcjson-dev libyajl-dev libyaml-dev check libsubunit-dev libssl-dev
    libcurl4-openssl-dev libmicrohttpd-dev libcrypt-dev lmdb-utils kcat maven
    default-jdk-headless python3 python3-venv python3-pip curl ca-certificates)
# tests/fuzz: clang with libFuzzer (-fsanitize=fuzzer,address,undefined)
PKGS+=(clang libclang-rt-14-dev)
# tests/run.sh's format phase: the layout .clang-format describes
PKGS+=(clang-format)
# tests/integration/test_takeover_fence.py: stops an instance at a
# breakpoint (rd_kafka_commit_transaction), inside the window where its
# transaction holds the group's offsets
PKGS+=(gdb)
# deploy/kafka/kafka.sh KAFKA_SECURITY=sasl_ssl: the CA and the broker's
# certificate (tests/integration/test_secure_broker.py)
PKGS+=(openssl)
# tests/deploy (meson test suite "deploy"): systemd-analyze for the unit,
# groff and man for the man pages, PyYAML for the Kubernetes manifests
PKGS+=(systemd groff-base man-db python3-yaml)
# tests/integration/test_seqgatectl_audit.py: renders seqgatectl audit's
# --html page in a headless browser (DOM after its script ran, screenshot)
PKGS+=(chromium)
# deploy/demo.sh (--demo): build seqgate and seqgatectl, feed the embedded
# Kafka with kcat, check the output with python3
DEMO_PKGS=(build-essential meson ninja-build pkg-config librdkafka-dev
    liblmdb-dev libcjson-dev libyajl-dev libyaml-dev check libsubunit-dev
    libssl-dev libcurl4-openssl-dev libmicrohttpd-dev libcrypt-dev kcat python3
    ca-certificates)
DEMO=0
LIST=0
for arg in "$@"; do
    case $arg in
    --scan-build) PKGS+=(clang-tools) ;;
    --deb) PKGS+=(debhelper lintian) ;;
    --demo) DEMO=1 ;;
    --list) LIST=1 ;;
    *)
        printf 'install-deps: unknown argument %s\n' "$arg" >&2
        exit 2
        ;;
    esac
done

((DEMO)) && PKGS=("${DEMO_PKGS[@]}")
if ((LIST)); then
    printf '%s\n' "${PKGS[@]}"
    exit 0
fi

log() { printf 'install-deps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- Debian packages -------------------------------------------------------
missing=()
if command -v dpkg >/dev/null 2>&1; then
    for p in "${PKGS[@]}"; do
        # dpkg -s exits 0 also for removed-but-configured packages; check the
        # status line says "install ok installed".
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
else
    log "no dpkg: not a Debian system, skipping system packages (install the equivalents of: ${PKGS[*]})"
fi

if ((${#missing[@]})); then
    log "missing Debian packages: ${missing[*]}"
    if [[ $(id -u) == 0 ]]; then
        SUDO=()
    elif command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        die "not root and no sudo; install as root: apt-get install ${missing[*]}"
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -qq >&2
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# --- Python venv -----------------------------------------------------------
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || die "$PY not found"
if ((DEMO)); then
    command -v "$PY"
    exit 0
fi
if [[ ! -x $VENV/bin/python ]]; then
    log "creating venv $VENV (with $($PY --version 2>&1))"
    mkdir -p "$(dirname "$VENV")"
    "$PY" -m venv "$VENV" >&2
fi
stamp=$VENV/.requirements.sha256
want=$(sha256sum "$REQS" | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]] ||
    ! "$VENV/bin/python" -c 'import confluent_kafka, pytest, jsonschema, xdist' 2>/dev/null; then
    log "installing $REQS into $VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQS" >&2
    echo "$want" >"$stamp"
fi

# --- promtool (tests/deploy/check_prometheus.sh) ----------------------------
# Prometheus's rules checker, from the Go module proxy at a pinned version
# (tests/tools/promtool.sh; the Go toolchain is the machine's)
"$ROOT/tests/tools/promtool.sh" >&2 || die "promtool could not be installed"
echo "$VENV/bin/python"
