#!/usr/bin/env bash
# deploy/kafka/kafka.sh: a real, single-node Apache Kafka 4.x broker for
# seqgate's integration tests and local runs.
#
# The broker is the genuine Apache Kafka server (KRaft mode, one process that
# is both broker and controller) fetched from Maven Central with Maven, so the
# tests talk to the same code a production cluster runs: consumer groups,
# rebalances, transactions and compacted topics all behave for real.
#
# Usage:
#   kafka.sh fetch                      download the jars into the cache
#   kafka.sh start                      fetch, format and start a broker; prints
#                                       its bootstrap address on stdout once the
#                                       broker answers metadata requests
#   kafka.sh stop                       SIGTERM, SIGKILL after a timeout, then
#                                       remove the work dir
#   kafka.sh restart                    stop the broker process and start it
#                                       again on the same work dir (same
#                                       ports, cluster id and data); prints
#                                       the bootstrap address once ready
#   kafka.sh status                     exit 0 and say so if it is running
#   kafka.sh bootstrap                  print the bootstrap address
#   kafka.sh logs [N]                   print the last N lines of the broker log
#   kafka.sh create-topic NAME PARTITIONS [key=value ...]
#                                       create a topic (replication factor 1)
#                                       with topic-level configs, via Kafka's
#                                       own TopicCommand
#   kafka.sh password USER              (sasl_ssl) print the SCRAM password of
#                                       USER, made at format time
#   kafka.sh acl ARGS...                (sasl_ssl) Kafka's AclCommand as the
#                                       admin user, e.g. --list, --remove ...
#   kafka.sh grant-seqgate key=value... (sasl_ssl) the ACLs one seqgate
#                                       instance needs, and nothing more:
#       user=NAME               the user seqgate (and seqgatectl) log in as
#       group=G                 its consumer group (group.id): Read
#       instance=I              its instance_id: exactly_once's transactional
#                               id <G>-<I> (Write), and the restore
#                               consumer's group <G>-<I>.restore (Describe:
#                               never joined, librdkafka looks it up)
#       guarantee=at_least_once no transactional id (default exactly_once)
#       input=T                 an input topic: Read; repeat for several
#       output=T, dlq=T         an output or DLQ topic: Write, DescribeConfigs
#                               (max.message.bytes); Read (seqgatectl dlq
#                               and audit read them)
#       changelog=T             a changelog topic: Create (seqgate creates
#                               it), Read, Write, DescribeConfigs
#                               (cleanup.policy is checked)
#
# Security (KAFKA_SECURITY=sasl_ssl at start): the client listener is
# SASL_SSL with SCRAM-SHA-512 over TLS 1.2+, the broker's certificate signed
# by a CA that start makes with openssl (<work dir>/tls/ca.crt: give it to
# clients as ssl.ca.location); SCRAM credentials are written into the
# metadata at format time (kafka-storage format --add-scram: KRaft has no
# ZooKeeper to hold them before the broker runs) for "admin" (the broker's
# own inter-broker login and a super user) and each name of
# KAFKA_SCRAM_USERS, each with a random password (kafka.sh password NAME).
# The StandardAuthorizer denies what no ACL allows. The KRaft controller
# listener stays PLAINTEXT on 127.0.0.1 (KRaft cannot authenticate it with
# SCRAM: the credentials live in the metadata it serves), its principal
# ANONYMOUS a super user: it is the broker talking to its own controller.
# The listener offers PLAIN too, for the same users and passwords (in
# server.properties, as PLAIN wants them): librdkafka before 2.6.1 (Debian
# bookworm has 2.0.2) cannot log in with SCRAM to Kafka 4 (it sends the
# client nonce twice in its final message, which Kafka 4 refuses; librdkafka
# pull request 4895), but can with PLAIN, which TLS protects on the wire.
# <work dir>/admin.properties is a Java client config for the admin user.
#
# Environment:
#   SEQGATE_KAFKA_VERSION  Kafka version to fetch (default 4.1.1)
#   SEQGATE_KAFKA_CACHE    cache root (default deploy/kafka/.cache); jars go
#                          to <cache>/<version>/libs
#   KAFKA_WORKDIR          work dir of this broker (config, data, logs, pid).
#                          When unset, start makes a temp dir and records it in
#                          <cache>/current.workdir so that a later stop from
#                          another shell finds it. Set it to run several
#                          brokers side by side.
#   KAFKA_START_TIMEOUT    seconds to wait for readiness (default 120)
#   KAFKA_STOP_TIMEOUT     seconds between SIGTERM and SIGKILL (default 30)
#   KAFKA_HEAP_OPTS        JVM heap flags (default "-Xmx512m -Xms256m")
#   KAFKA_EXTRA_PROPS      extra server.properties lines (key=value, one per
#                          line), appended last so they override the defaults
#   KAFKA_KEEP_WORKDIR     1: stop leaves the work dir (logs, data) in place
#   KAFKA_BOOTSTRAP        used by create-topic when no broker of ours runs
#   KAFKA_SECURITY         plaintext (default) or sasl_ssl (see Security)
#   KAFKA_SCRAM_USERS      sasl_ssl: SCRAM users besides admin, space
#                          separated (default "seqgate")
#
# Needs: java (17+) and mvn; kcat is used for the readiness check when
# present, Kafka's own TopicCommand otherwise; openssl for sasl_ssl.
# tests/install-deps.sh installs all of them on Debian.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VERSION=${SEQGATE_KAFKA_VERSION:-4.1.1}
CACHE_ROOT=${SEQGATE_KAFKA_CACHE:-$HERE/.cache}
LIBS=$CACHE_ROOT/$VERSION/libs
CURRENT=$CACHE_ROOT/current.workdir
START_TIMEOUT=${KAFKA_START_TIMEOUT:-120}
STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-30}
HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}
# Short-lived tools (storage format, topic admin) start faster with C1 only.
TOOL_OPTS="-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true"

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

need() {
    command -v "$1" >/dev/null 2>&1 ||
        die "'$1' not found; run tests/install-deps.sh (Debian: apt-get install $2)"
}

# --- fetch -----------------------------------------------------------------

cmd_fetch() {
    if [[ -f $LIBS/.complete ]]; then
        return 0
    fi
    need java default-jdk-headless
    need mvn maven
    local tmp=$LIBS.partial.$$ out
    rm -rf "$tmp"
    mkdir -p "$(dirname "$LIBS")"
    out=$(mktemp)
    log "fetching Apache Kafka $VERSION (kafka_2.13, kafka-tools) from Maven Central"
    if ! mvn -q -B -f "$HERE/pom.xml" -Dkafka.version="$VERSION" \
            dependency:copy-dependencies -DincludeScope=runtime \
            -DoutputDirectory="$tmp" >"$out" 2>&1; then
        cat "$out" >&2
        rm -rf "$tmp" "$out"
        die "mvn dependency:copy-dependencies failed for Kafka $VERSION"
    fi
    rm -f "$out"
    ls "$tmp"/kafka_2.13-"$VERSION".jar >/dev/null 2>&1 ||
        die "Kafka jar missing after fetch (in $tmp)"
    rm -rf "$LIBS"
    mv "$tmp" "$LIBS"
    date -u +%FT%TZ >"$LIBS/.complete"
    log "cached $(ls "$LIBS"/*.jar | wc -l) jars in $LIBS"
}

# --- work dir / state ------------------------------------------------------

# Prints the work dir of the broker this shell refers to, or nothing.
workdir() {
    if [[ -n ${KAFKA_WORKDIR:-} ]]; then
        printf '%s\n' "$KAFKA_WORKDIR"
    elif [[ -f $CURRENT ]]; then
        cat "$CURRENT"
    fi
}

# True when the pid recorded in work dir $1 is a live Kafka broker (checks the
# command line too, so a recycled pid is never signalled).
broker_alive() {
    local wd=$1 pid
    [[ -f $wd/pid ]] || return 1
    pid=$(cat "$wd/pid")
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka'
}

# Prints two distinct free TCP ports on 127.0.0.1.
free_ports() {
    if command -v python3 >/dev/null 2>&1; then
        python3 - <<'PY'
import socket
socks = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
        return
    fi
    # Fallback without python: probe random ports with bash's /dev/tcp (a
    # refused connection means nobody listens there).
    local ports=() p
    while ((${#ports[@]} < 2)); do
        p=$((20000 + RANDOM % 40000))
        [[ " ${ports[*]} " == *" $p "* ]] && continue
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            ports+=("$p")
        fi
    done
    echo "${ports[*]}"
}

# 16 random bytes, base64url without padding: the form of a Kafka cluster id
# (org.apache.kafka.common.Uuid), as `kafka-storage random-uuid` prints it.
# Never one that starts with '-': kafka-storage's argument parser would take
# it for an option ("--cluster-id: expected one argument"), one start in 32.
random_cluster_id() {
    local id
    while :; do
        id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
        [[ $id == -* ]] || break
    done
    printf '%s\n' "$id"
}

write_config() {
    local wd=$1 bport=$2 cport=$3 lst=PLAINTEXT
    [[ $(security) == sasl_ssl ]] && lst=SASL_SSL
    cat >"$wd/server.properties" <<EOF
# Generated by deploy/kafka/kafka.sh: single-node KRaft (broker+controller)
# on loopback, for tests. Replication factors are 1 because there is one node.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=$lst://127.0.0.1:$bport,CONTROLLER://127.0.0.1:$cport
advertised.listeners=$lst://127.0.0.1:$bport,CONTROLLER://127.0.0.1:$cport
inter.broker.listener.name=$lst
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,$lst:$lst
log.dirs=$wd/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
num.network.threads=2
num.io.threads=4
EOF
    if [[ $lst == SASL_SSL ]]; then
        cat >>"$wd/server.properties" <<EOF
# KAFKA_SECURITY=sasl_ssl: SCRAM-SHA-512 (and PLAIN) over TLS, ACLs enforced
sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(cat "$wd/users/admin")";
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="$(cat "$wd/users/admin")"$(plain_users "$wd");
ssl.keystore.type=PKCS12
ssl.keystore.location=$wd/tls/broker.p12
ssl.keystore.password=$(cat "$wd/tls/keystore.password")
ssl.truststore.type=PEM
ssl.truststore.location=$wd/tls/ca.crt
ssl.client.auth=none
ssl.enabled.protocols=TLSv1.3,TLSv1.2
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:admin;User:ANONYMOUS
EOF
    fi
    if [[ -n ${KAFKA_EXTRA_PROPS:-} ]]; then
        printf '# KAFKA_EXTRA_PROPS\n%s\n' "$KAFKA_EXTRA_PROPS" >>"$wd/server.properties"
    fi
    cat >"$wd/log4j2.properties" <<EOF
# Generated by deploy/kafka/kafka.sh: the broker logs to a file only.
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $wd/logs/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
EOF
}

# The security of the broker being started: plaintext or sasl_ssl.
security() {
    case ${KAFKA_SECURITY:-plaintext} in
    plaintext | PLAINTEXT) echo plaintext ;;
    sasl_ssl | SASL_SSL) echo sasl_ssl ;;
    *) die "KAFKA_SECURITY=${KAFKA_SECURITY}: expected plaintext or sasl_ssl" ;;
    esac
}

# A random secret: 24 bytes, base64url without padding.
random_secret() {
    head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n'
}

# Makes the CA and the broker's certificate in $1/tls (openssl): a CA key
# and self-signed certificate, a broker key and a certificate the CA signs
# for 127.0.0.1 and localhost (subjectAltName: clients verify the name),
# and the broker's PKCS12 keystore with a random password.
make_tls() {
    local tls=$1/tls pw
    need openssl openssl
    mkdir -p "$tls"
    (
        umask 077
        openssl req -x509 -newkey rsa:2048 -nodes -days 30 -sha256 \
            -subj "/CN=seqgate test CA" -keyout "$tls/ca.key" -out "$tls/ca.crt" \
            -addext basicConstraints=critical,CA:TRUE \
            -addext keyUsage=critical,keyCertSign,cRLSign
        openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=localhost" \
            -keyout "$tls/broker.key" -out "$tls/broker.csr"
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' \
            >"$tls/broker.ext"
        openssl x509 -req -in "$tls/broker.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
            -CAcreateserial -days 30 -sha256 -extfile "$tls/broker.ext" \
            -out "$tls/broker.crt"
        pw=$(random_secret)
        printf '%s\n' "$pw" >"$tls/keystore.password"
        openssl pkcs12 -export -in "$tls/broker.crt" -inkey "$tls/broker.key" \
            -certfile "$tls/ca.crt" -name broker -passout "pass:$pw" \
            -out "$tls/broker.p12"
    ) >"$1/tls.log" 2>&1 || { cat "$1/tls.log" >&2; die "making the TLS files failed"; }
    chmod 644 "$tls/ca.crt"
}

# The SCRAM users of work dir $1: admin and KAFKA_SCRAM_USERS, each with a
# random password in $1/users/NAME; the Java admin client config.
make_users() {
    local wd=$1 u
    mkdir -p "$wd/users"
    chmod 700 "$wd/users"
    for u in admin ${KAFKA_SCRAM_USERS-seqgate}; do
        [[ $u =~ ^[A-Za-z0-9._-]+$ ]] || die "SCRAM user name '$u': letters, digits, . _ - only"
        (umask 077 && random_secret >"$wd/users/$u")
    done
    (umask 077 && cat >"$wd/admin.properties" <<EOF
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(cat "$wd/users/admin")";
ssl.truststore.type=PEM
ssl.truststore.location=$wd/tls/ca.crt
EOF
    )
}

# The PLAIN users of work dir $1, as JAAS options: user_NAME="password".
plain_users() {
    local f
    for f in "$1"/users/*; do
        printf ' user_%s="%s"' "$(basename "$f")" "$(cat "$f")"
    done
}

# The kafka-storage format arguments that add the SCRAM credentials of
# work dir $1's users, one per line.
scram_args() {
    local f
    for f in "$1"/users/*; do
        printf '%s\n' --add-scram \
            "SCRAM-SHA-512=[name=$(basename "$f"),password=$(cat "$f")]"
    done
}

# "--command-config <work dir $1>/admin.properties" for a sasl_ssl broker,
# one word per line.
command_config() {
    [[ -f $1/admin.properties ]] && printf '%s\n' --command-config "$1/admin.properties"
    return 0
}

# True when the broker at $1 answers a metadata request listing one broker
# ($2: its work dir). A sasl_ssl broker is asked by Kafka's own
# TopicCommand as the admin user: kcat links the system's librdkafka, and
# librdkafka before 2.6.1 cannot log in with SCRAM to Kafka 4 (it sends
# the client nonce twice in its final message, which Kafka 4 refuses;
# librdkafka pull request 4895).
broker_ready() {
    local addr=$1 wd=$2 out
    if [[ ! -f $wd/admin.properties ]] && command -v kcat >/dev/null 2>&1; then
        out=$(kcat -L -b "$addr" -m 2 2>/dev/null) || return 1
        grep -q ' 1 brokers:' <<<"$out"
    else
        local -a cc
        mapfile -t cc < <(command_config "$wd")
        # shellcheck disable=SC2086
        timeout 30 java $TOOL_OPTS -cp "$LIBS/*" org.apache.kafka.tools.TopicCommand \
            --bootstrap-server "$addr" "${cc[@]}" --list >/dev/null 2>&1
    fi
}

print_log_tail() {
    local wd=$1 n=${2:-60} f
    for f in "$wd/format.log" "$wd/logs/stdout.log" "$wd/logs/server.log"; do
        [[ -s $f ]] || continue
        echo "----- tail of $f -----" >&2
        tail -n "$n" "$f" >&2
    done
}

# --- start / stop ----------------------------------------------------------

cmd_start() {
    local wd owned=0
    wd=$(workdir)
    if [[ -n $wd ]] && broker_alive "$wd"; then
        log "already running (work dir $wd)"
        cat "$wd/bootstrap"
        return 0
    fi
    cmd_fetch
    need java default-jdk-headless

    if [[ -n ${KAFKA_WORKDIR:-} ]]; then
        wd=$KAFKA_WORKDIR
        mkdir -p "$wd"
    else
        wd=$(mktemp -d "${TMPDIR:-/tmp}/seqgate-kafka.XXXXXX")
        owned=1
    fi
    wd=$(cd "$wd" && pwd)
    rm -rf "$wd/data" "$wd/logs" "$wd/pid" "$wd/bootstrap" "$wd/tls" "$wd/users" \
        "$wd/admin.properties"
    mkdir -p "$wd/data" "$wd/logs"
    if ((owned)); then
        : >"$wd/.owned-by-kafka.sh"
        mkdir -p "$CACHE_ROOT"
        printf '%s\n' "$wd" >"$CURRENT"
    fi

    local ports bport cport addr
    ports=$(free_ports)
    read -r bport cport <<<"$ports"
    addr=127.0.0.1:$bport
    local -a scram=()
    if [[ $(security) == sasl_ssl ]]; then
        make_tls "$wd"
        make_users "$wd"
        mapfile -t scram < <(scram_args "$wd")
    fi
    write_config "$wd" "$bport" "$cport"

    # shellcheck disable=SC2086
    if ! java $TOOL_OPTS -Dlog4j2.configurationFile="$wd/log4j2.properties" \
            -cp "$LIBS/*" kafka.tools.StorageTool format \
            --config "$wd/server.properties" --cluster-id "$(random_cluster_id)" \
            --standalone "${scram[@]}" >"$wd/format.log" 2>&1; then
        print_log_tail "$wd"
        die "formatting KRaft storage failed"
    fi

    echo "$addr" >"$wd/bootstrap"
    launch_broker "$wd" new
}

# Starts the broker process of the prepared work dir $1 (server.properties,
# formatted data dir, $1/bootstrap) and waits until it answers metadata
# requests; prints the bootstrap address. $2: "new" truncates
# logs/stdout.log, "again" (restart) appends to it.
launch_broker() {
    local wd=$1 mode=$2 addr
    addr=$(cat "$wd/bootstrap")
    [[ $mode == again ]] || : >"$wd/logs/stdout.log"
    # shellcheck disable=SC2086
    nohup java $HEAP_OPTS -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$wd/log4j2.properties" \
        -Dkafka.logs.dir="$wd/logs" \
        -cp "$LIBS/*" kafka.Kafka "$wd/server.properties" \
        >>"$wd/logs/stdout.log" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" >"$wd/pid"

    local deadline=$((SECONDS + START_TIMEOUT))
    while ! broker_ready "$addr" "$wd"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            print_log_tail "$wd"
            KAFKA_KEEP_WORKDIR=1 stop_workdir "$wd"
            die "broker exited during startup (work dir kept: $wd)"
        fi
        if ((SECONDS >= deadline)); then
            print_log_tail "$wd"
            KAFKA_KEEP_WORKDIR=1 stop_workdir "$wd"
            die "broker not ready after ${START_TIMEOUT}s (work dir kept: $wd)"
        fi
        sleep 0.5
    done
    log "broker $VERSION ready at $addr (pid $pid, work dir $wd)"
    echo "$addr"
}

# Stops the broker process of work dir $1 (SIGTERM, SIGKILL after
# STOP_TIMEOUT) and forgets its pid; leaves config, data and logs alone.
kill_broker() {
    local wd=$1 pid
    if broker_alive "$wd"; then
        pid=$(cat "$wd/pid")
        kill -TERM "$pid" 2>/dev/null || true
        local deadline=$((SECONDS + STOP_TIMEOUT))
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
            sleep 0.2
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "broker pid $pid ignored SIGTERM for ${STOP_TIMEOUT}s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
        fi
        log "stopped broker pid $pid"
    fi
    rm -f "$wd/pid"
}

# Stops the broker of work dir $1 and removes what start made there.
stop_workdir() {
    local wd=$1
    kill_broker "$wd"
    if [[ ${KAFKA_KEEP_WORKDIR:-0} == 1 ]]; then
        return 0
    fi
    if [[ -f $wd/.owned-by-kafka.sh ]]; then
        rm -rf "$wd"
    else
        rm -rf "$wd/data" "$wd/logs" "$wd/bootstrap" "$wd/server.properties" \
            "$wd/log4j2.properties" "$wd/format.log" "$wd/tls" "$wd/tls.log" \
            "$wd/users" "$wd/admin.properties"
    fi
    # a new start formats a new cluster on new ports: say so, as a user
    # who stops and starts to "restart" loses the topics (restart keeps
    # them; KAFKA_KEEP_WORKDIR=1 keeps them across stop)
    log "removed its data in $wd (topics and offsets are gone; 'restart' or KAFKA_KEEP_WORKDIR=1 keeps them)"
    if [[ -f $CURRENT && $(cat "$CURRENT") == "$wd" ]]; then
        rm -f "$CURRENT"
    fi
}

cmd_stop() {
    local wd
    wd=$(workdir)
    if [[ -z $wd || ! -d $wd ]]; then
        log "no broker to stop"
        rm -f "$CURRENT"
        return 0
    fi
    stop_workdir "$wd"
}

# Stops the broker (if it runs) and starts it again on the same work dir:
# same config, ports, cluster id and data, so topics, committed offsets and
# transactions survive and clients reconnect to the same bootstrap address.
cmd_restart() {
    local wd
    wd=$(workdir)
    [[ -n $wd && -f $wd/server.properties && -f $wd/bootstrap && -d $wd/data ]] ||
        die "no broker work dir to restart (kafka.sh start first)"
    need java default-jdk-headless
    kill_broker "$wd"
    log "restarting the broker on work dir $wd"
    launch_broker "$wd" again
}

cmd_status() {
    local wd
    wd=$(workdir)
    if [[ -n $wd ]] && broker_alive "$wd"; then
        echo "running: bootstrap $(cat "$wd/bootstrap") pid $(cat "$wd/pid") work dir $wd"
        return 0
    fi
    echo "not running"
    return 3
}

cmd_bootstrap() {
    local wd
    wd=$(workdir)
    [[ -n $wd ]] && broker_alive "$wd" || die "no broker running (kafka.sh start)"
    cat "$wd/bootstrap"
}

cmd_logs() {
    local wd
    wd=$(workdir)
    [[ -n $wd && -d $wd ]] || die "no work dir"
    print_log_tail "$wd" "${1:-100}" 2>&1
}

cmd_create_topic() {
    (($# >= 2)) || die "usage: kafka.sh create-topic NAME PARTITIONS [key=value ...]"
    local name=$1 partitions=$2 addr wd
    shift 2
    wd=$(workdir)
    if [[ -n $wd ]] && broker_alive "$wd"; then
        addr=$(cat "$wd/bootstrap")
    elif [[ -n ${KAFKA_BOOTSTRAP:-} ]]; then
        addr=$KAFKA_BOOTSTRAP
    else
        die "no broker: start one or set KAFKA_BOOTSTRAP"
    fi
    cmd_fetch
    local args=(--bootstrap-server "$addr" --create --topic "$name"
        --partitions "$partitions" --replication-factor 1)
    if [[ -n $wd ]]; then
        mapfile -t -O "${#args[@]}" args < <(command_config "$wd")
    fi
    local kv
    for kv in "$@"; do
        [[ $kv == *=* ]] || die "topic config '$kv' is not key=value"
        args+=(--config "$kv")
    done
    # shellcheck disable=SC2086
    java $TOOL_OPTS -Dlog4j2.level=WARN -cp "$LIBS/*" \
        org.apache.kafka.tools.TopicCommand "${args[@]}"
}

# The work dir of the running sasl_ssl broker, or die.
secure_workdir() {
    local wd
    wd=$(workdir)
    [[ -n $wd ]] && broker_alive "$wd" || die "no broker running (kafka.sh start)"
    [[ -f $wd/admin.properties ]] ||
        die "the broker is not sasl_ssl (KAFKA_SECURITY=sasl_ssl kafka.sh start)"
    printf '%s\n' "$wd"
}

cmd_password() {
    (($# == 1)) || die "usage: kafka.sh password USER"
    local wd
    wd=$(secure_workdir)
    [[ -f $wd/users/$1 ]] || die "no SCRAM user '$1' (KAFKA_SCRAM_USERS at start)"
    cat "$wd/users/$1"
}

cmd_acl() {
    local wd
    wd=$(secure_workdir)
    # shellcheck disable=SC2086
    java $TOOL_OPTS -Dlog4j2.level=WARN -cp "$LIBS/*" org.apache.kafka.tools.AclCommand \
        --bootstrap-server "$(cat "$wd/bootstrap")" \
        --command-config "$wd/admin.properties" "$@"
}

# The ACLs of one seqgate instance (see Usage): exactly its consumer group,
# its topics, its changelogs and its transactional id, in one AclCommand
# run per resource.
cmd_grant_seqgate() {
    local kv key val user="" group="" inst="" guarantee=exactly_once
    local -a topics=() args=()
    for kv in "$@"; do
        [[ $kv == *=* ]] || die "grant-seqgate: '$kv' is not key=value"
        key=${kv%%=*} val=${kv#*=}
        [[ -n $val ]] || die "grant-seqgate: $key is empty"
        case $key in
        user) user=$val ;;
        group) group=$val ;;
        instance) inst=$val ;;
        guarantee) guarantee=$val ;;
        input | output | dlq | changelog) topics+=("$key" "$val") ;;
        *) die "grant-seqgate: unknown key '$key'" ;;
        esac
    done
    [[ -n $user && -n $group && -n $inst ]] ||
        die "grant-seqgate: user=, group= and instance= are required"
    [[ $guarantee == exactly_once || $guarantee == at_least_once ]] ||
        die "grant-seqgate: guarantee=$guarantee: exactly_once or at_least_once"
    local p=User:$user i op txn=""
    local -a ops
    cmd_acl --add --allow-principal "$p" --operation Read --group "$group" >/dev/null
    cmd_acl --add --allow-principal "$p" --operation Describe \
        --group "$group-$inst.restore" >/dev/null
    if [[ $guarantee == exactly_once ]]; then
        txn=$group-$inst
        cmd_acl --add --allow-principal "$p" --operation Write \
            --transactional-id "$txn" >/dev/null
    fi
    for ((i = 0; i < ${#topics[@]}; i += 2)); do
        case ${topics[i]} in
        input) ops=(Read) ;;
        output | dlq) ops=(Write DescribeConfigs Read) ;;
        changelog) ops=(Create Read Write DescribeConfigs) ;;
        esac
        args=(--add --allow-principal "$p" --topic "${topics[i + 1]}")
        for op in "${ops[@]}"; do args+=(--operation "$op"); done
        cmd_acl "${args[@]}" >/dev/null
    done
    log "granted $p: group $group${txn:+, transactional id $txn}, $((${#topics[@]} / 2)) topic(s)"
}

case ${1:-} in
fetch) cmd_fetch ;;
start) cmd_start ;;
stop) cmd_stop ;;
restart) cmd_restart ;;
status) cmd_status ;;
bootstrap) cmd_bootstrap ;;
logs) shift; cmd_logs "$@" ;;
create-topic) shift; cmd_create_topic "$@" ;;
password) shift; cmd_password "$@" ;;
acl) shift; cmd_acl "$@" ;;
grant-seqgate) shift; cmd_grant_seqgate "$@" ;;
*)
    sed -n '/^# Usage:/,/^# Needs:/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
