#!/usr/bin/env bash
# tests/deploy/check_systemd.sh UNIT SEQGATE MANDIR: the systemd unit of
# deploy/systemd passes `systemd-analyze verify` (with ExecStart pointing at
# the built SEQGATE, and its Documentation= man pages found in MANDIR) and
# `systemd-analyze security` scores it below SG_SYSTEMD_MAX_EXPOSURE
# (default 3.0), and `systemctl reload` sends the SIGHUP that reloads the
# configuration (ExecReload=, semantics "Reloading the configuration")
# while SIGTERM stays the stop. Exits 77 (meson: skipped) with the reason where
# systemd-analyze is missing.
set -euo pipefail
unit=$(realpath "$1") seqgate=$(realpath "$2") mandir=$(realpath "$3")
max=${SG_SYSTEMD_MAX_EXPOSURE:-3.0}

# reload and stop, read from the unit itself (no systemd needed)
reload=$(sed -n 's/^ExecReload=//p' "$unit")
if [[ $reload != '/bin/kill -HUP $MAINPID' ]]; then
    printf 'check_systemd: %s: ExecReload= is "%s", want "/bin/kill -HUP $MAINPID" (systemctl reload: SIGHUP reloads the configuration)\n' "$unit" "$reload"
    exit 1
fi
kill_signal=$(sed -n 's/^KillSignal=//p' "$unit")
if [[ $kill_signal != SIGTERM ]]; then
    printf 'check_systemd: %s: KillSignal= is "%s", want SIGTERM (the clean stop)\n' "$unit" "$kill_signal"
    exit 1
fi
echo "check_systemd: ExecReload sends SIGHUP, KillSignal is SIGTERM: ok"

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "check_systemd: SKIP: systemd-analyze not installed (Debian package systemd)"
    exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# verify: the unit as installed, but with the binary that was built (verify
# checks that every Exec*= command exists) and man pages in a MANPATH.
name=$(basename "$unit")
sed "s#/usr/local/bin/seqgate#$seqgate#g" "$unit" >"$tmp/$name"
mkdir -p "$tmp/man/man1"
for page in "$mandir"/*.1; do
    ln -s "$(cd "$(dirname "$page")" && pwd)/$(basename "$page")" "$tmp/man/man1/"
done
if ! out=$(cd "$tmp" && MANPATH=$tmp/man systemd-analyze verify "$tmp/$name" 2>&1) ||
    [[ -n $out ]]; then
    printf 'check_systemd: systemd-analyze verify %s failed:\n%s\n' "$unit" "$out"
    exit 1
fi
echo "check_systemd: systemd-analyze verify: ok"

out=$(systemd-analyze security --offline=true --no-pager "$tmp/$name" 2>&1) || true
score=$(printf '%s\n' "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
if [[ -z $score ]]; then
    printf 'check_systemd: no exposure level in the output of systemd-analyze security:\n%s\n' "$out"
    exit 1
fi
echo "check_systemd: systemd-analyze security: exposure $score (must be below $max)"
if ! awk -v s="$score" -v m="$max" 'BEGIN { exit !(s < m) }'; then
    printf '%s\n' "$out" | grep -v '✓' || true
    exit 1
fi
