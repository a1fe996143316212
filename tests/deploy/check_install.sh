#!/usr/bin/env bash
# tests/deploy/check_install.sh BUILDDIR PREFIX BINDIR MANDIR UNITDIR:
# `meson install --destdir` of BUILDDIR installs what an operator needs
# (docs/deployment.md): both binaries in PREFIX/BINDIR, both man pages in
# PREFIX/MANDIR/man1, the bash completion, and the systemd unit in UNITDIR
# (relative: under PREFIX) with ExecStartPre= and ExecStart= naming the
# installed seqgate, not the default prefix's. Nothing is written outside
# a temporary directory.
set -euo pipefail
build=$1 prefix=$2 bindir=$3 mandir=$4 unitdir=$5
[[ $bindir == /* ]] || bindir=$prefix/$bindir
[[ $mandir == /* ]] || mandir=$prefix/$mandir
[[ $unitdir == /* ]] || unitdir=$prefix/$unitdir

dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >/dev/null

fail=0
need() { # PATH WHAT
    if [[ ! -f $dest$1 ]]; then
        echo "check_install: missing $2: $1"
        fail=1
    fi
}
need "$bindir/seqgate" "the daemon"
need "$bindir/seqgatectl" "the operator CLI"
need "$mandir/man1/seqgate.1" "man seqgate"
need "$mandir/man1/seqgatectl.1" "man seqgatectl"
if [[ $unitdir == no ]]; then
    echo "check_install: -Dsystemdsystemunitdir=no: no unit to check"
else
    unit=$unitdir/seqgate.service
    need "$unit" "the systemd unit"
    if [[ -f $dest$unit ]]; then
        for key in ExecStartPre ExecStart; do
            exe=$(sed -n "s/^$key=\([^ ]*\).*/\1/p" "$dest$unit")
            if [[ $exe != "$bindir/seqgate" ]]; then
                echo "check_install: $unit: $key= runs '$exe', not $bindir/seqgate"
                fail=1
            fi
        done
    fi
fi
if ! find "$dest" -path '*bash-completion/completions/seqgatectl' | grep -q .; then
    echo "check_install: missing the bash completion (bash-completion/completions/seqgatectl)"
    fail=1
fi
if ((fail)); then
    echo "check_install: installed:"
    (cd "$dest" && find . -type f | sort)
    exit 1
fi
echo "check_install: meson install: binaries, man pages, completion and unit ($unitdir) ok"
