#!/usr/bin/env bash
# tests/deploy/check_deb.sh: the Debian package (debian/) of the source tree
# as it is — the files git tracks or would add, uncommitted changes
# included — built, checked and unpacked (docs/deployment.md "Debian
# package"):
#   1. dpkg-buildpackage -us -uc (source and binary; DEB_BUILD_OPTIONS
#      nocheck: the tests run in tests/run.sh, not in the package build)
#      in a copy of the tree under a temporary directory;
#   2. lintian on the .changes, failing on any error or warning (each
#      override in debian/*lintian-overrides says why);
#   3. the .deb holds both binaries, both man pages, the bash completion
#      and the unit in /lib/systemd/system naming /usr/bin/seqgate, and
#      depends on the libraries it links;
#   4. dpkg -x into a fake root: seqgate --version and seqgatectl --version
#      run from it and print this version, and seqgate --check-config
#      accepts examples/orders.json.
# Needs dpkg-dev, debhelper and lintian (tests/install-deps.sh --deb).
# Runs in tests/run.sh's "debian package" phase (a few minutes: the whole
# project is compiled again). SG_DEB_KEEP=1 keeps the directory.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'check_deb: %s\n' "$*"; }
die() { log "FAIL: $*"; exit 1; }

for tool in dpkg-buildpackage dh lintian git; do
    command -v "$tool" >/dev/null 2>&1 ||
        die "$tool not found (tests/install-deps.sh --deb installs dpkg-dev, debhelper, lintian)"
done

version=$(sed -n '1s/^seqgate (\([^)]*\)).*/\1/p' "$root/debian/changelog")
meson_version=$(sed -n "s/^  version : '\([^']*\)',/\1/p" "$root/meson.build")
[[ -n $version && $version == "$meson_version" ]] ||
    die "debian/changelog says version '$version', meson.build '$meson_version'"

work=$(mktemp -d "${TMPDIR:-/tmp}/seqgate-deb.XXXXXX")
if [[ -n ${SG_DEB_KEEP:-} ]]; then
    log "keeping $work"
else
    trap 'rm -rf "$work"' EXIT
fi
src=$work/seqgate-$version
mkdir -p "$src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -xf - -C "$src"

arch=$(dpkg --print-architecture)
log "dpkg-buildpackage -us -uc in $src"
t0=$(date +%s)
if ! (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
    dpkg-buildpackage -us -uc >"$work/build.log" 2>&1); then
    tail -n 60 "$work/build.log"
    die "dpkg-buildpackage failed (log above)"
fi
log "built in $(($(date +%s) - t0)) s: $(cd "$work" && ls ./*.deb ./*.dsc | tr '\n' ' ')"

changes=$work/seqgate_${version}_${arch}.changes
deb=$work/seqgate_${version}_${arch}.deb
[[ -f $changes && -f $deb ]] || die "no $changes or $deb"

log "lintian --fail-on error,warning"
if ! lintian --fail-on error,warning --display-info "$changes"; then
    die "lintian reported errors or warnings (above): fix them, or override one in debian/*lintian-overrides saying why"
fi

contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./usr/bin/seqgate ./usr/bin/seqgatectl \
    ./usr/share/man/man1/seqgate.1.gz ./usr/share/man/man1/seqgatectl.1.gz \
    ./usr/share/bash-completion/completions/seqgatectl \
    ./lib/systemd/system/seqgate.service; do
    grep -qx -- "$f" <<<"$contents" || die "$deb lacks $f"
done
depends=$(dpkg-deb -f "$deb" Depends)
for lib in librdkafka liblmdb libcjson libyajl libyaml libcurl libmicrohttpd libssl; do
    grep -q "$lib" <<<"$depends" || die "Depends lacks $lib: $depends"
done
log "contents and Depends ok ($depends)"

fake=$work/root
dpkg -x "$deb" "$fake"
for key in ExecStartPre ExecStart; do
    exe=$(sed -n "s/^$key=\([^ ]*\).*/\1/p" "$fake/lib/systemd/system/seqgate.service")
    [[ $exe == /usr/bin/seqgate ]] || die "the unit's $key= runs '$exe'"
done
got=$("$fake/usr/bin/seqgate" --version | head -n 1)
[[ $got == "seqgate $version" ]] || die "seqgate --version from the package: '$got'"
got=$("$fake/usr/bin/seqgatectl" --version | head -n 1)
[[ $got == "seqgate $version" ]] || die "seqgatectl --version from the package: '$got'"
"$fake/usr/bin/seqgate" --check-config "$root/examples/orders.json" >/dev/null ||
    die "seqgate --check-config examples/orders.json from the package failed"
log "dpkg -x: seqgate $version runs from the fake root; the unit names /usr/bin/seqgate"
log "ok"
