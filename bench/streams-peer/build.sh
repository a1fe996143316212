#!/usr/bin/env bash
# bench/streams-peer/build.sh: builds the Kafka Streams peer of the
# benchmark (bench/run.sh, mode "streams") with Maven: compiles it, runs its
# unit tests, copies its runtime dependencies (Kafka Streams 4.1.1 and
# RocksDB from Maven Central, cached in ~/.m2) to target/lib.
# Skips Maven when target/streams-peer.jar is newer than pom.xml and every
# source file. Prints the Java class path on stdout (its only output there).
#
# Needs: java 17+ and mvn (tests/install-deps.sh installs default-jdk-headless
# and maven on Debian), Maven Central reachable for the first build.
# Environment: SKIP_TESTS=1 skips the unit tests; MVN (default mvn).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MVN=${MVN:-mvn}
JAR=$HERE/target/streams-peer.jar
LIB=$HERE/target/lib

die() { printf 'streams-peer/build.sh: error: %s\n' "$*" >&2; exit 1; }

command -v java >/dev/null 2>&1 || die "java not found (Debian: apt-get install default-jdk-headless)"
command -v "$MVN" >/dev/null 2>&1 || die "$MVN not found (Debian: apt-get install maven)"
jv=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
[[ ${jv%%.*} -ge 17 ]] 2>/dev/null || die "java $jv: 17 or later needed"

if [[ -f $JAR && -f $LIB/.complete ]] &&
    [[ -z $(find "$HERE/pom.xml" "$HERE/src" -newer "$JAR" -print -quit) ]]; then
    :
else
    rm -f "$LIB/.complete"
    args=(-q -B -f "$HERE/pom.xml" package)
    [[ ${SKIP_TESTS:-0} == 1 ]] && args+=(-DskipTests)
    "$MVN" "${args[@]}" >&2 || die "mvn package failed"
    [[ -f $JAR ]] || die "mvn package made no $JAR"
    touch "$LIB/.complete"
fi
echo "$JAR:$LIB/*"
