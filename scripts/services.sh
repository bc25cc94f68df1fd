#!/usr/bin/env bash
# Makes sure the servers the tests and the demo talk to are installed and running; idempotent.
# Usage: scripts/services.sh [postgres] [mariadb] [rabbitmq] [s3] [mosquitto] [mongodb] [sqlserver]
#        [go]  (no argument: all of them)
#
# Each server is checked by connecting to its port; one that is down is started, one that is
# missing is installed from Debian's packages (s3s-fs from crates.io). A server that cannot be
# brought up fails the script loudly: tests never run against a missing dependency. MongoDB and
# SQL Server are stand-ins from PyPI (docs/TEST-SERVERS.md), installed in a virtual environment.
set -euo pipefail

S3_PORT=${S3_PORT:-9000}
S3_DATA=${S3_DATA:-/var/lib/fetcher-s3}
S3_ACCESS_KEY=${S3_ACCESS_KEY:-fetcher}
S3_SECRET_KEY=${S3_SECRET_KEY:-fetcher-secret}
VENV=${FETCHER_TEST_VENV:-/opt/fetcher-test-venv}
MONGO_PORT=${MONGO_PORT:-27017}
MONGO_DATA=${MONGO_DATA:-/var/lib/fetcher-mongo}

log() { printf 'services: %s\n' "$*" >&2; }

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local name=$1 port=$2 tries=${3:-120}
  for _ in $(seq "$tries"); do
    listening "$port" && return 0
    sleep 0.5
  done
  log "$name did not come up on 127.0.0.1:$port"
  return 1
}

apt_install() {
  log "installing $*"
  if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq >&2; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

ensure_postgres() {
  listening 5432 && return 0
  ls /etc/postgresql/*/main >/dev/null 2>&1 || apt_install postgresql
  log "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  wait_port PostgreSQL 5432
}

ensure_mariadb() {
  listening 3306 && return 0
  [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server
  log "starting MariaDB"
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_port MariaDB 3306
}

ensure_rabbitmq() {
  if ! listening 5672; then
    command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server
    log "starting RabbitMQ"
    rabbitmq-server -detached || true
    rabbitmqctl await_startup >/dev/null 2>&1 || true
    rabbitmqctl start_app >/dev/null 2>&1 || true
    wait_port RabbitMQ 5672
  fi
  # Its Prometheus endpoint (15692): the dashboard's queue panels are checked against it.
  if ! listening 15692; then
    log "enabling RabbitMQ's Prometheus plugin"
    rabbitmq-plugins enable rabbitmq_prometheus >/dev/null
    wait_port "RabbitMQ's Prometheus plugin" 15692
  fi
}

ensure_s3() {
  listening "$S3_PORT" && return 0
  if ! command -v s3s-fs >/dev/null; then
    log "installing s3s-fs 0.14.1 (a few minutes, once)"
    cargo install s3s-fs@0.14.1 --locked --features binary --quiet
  fi
  mkdir -p "$S3_DATA"
  log "starting s3s-fs on 127.0.0.1:$S3_PORT"
  # Started from its data directory: s3s-fs resolves paths against its working directory, and
  # a caller's may be a test clone that is deleted later (every request then fails with 500).
  (cd "$S3_DATA" && exec nohup s3s-fs --host 127.0.0.1 --port "$S3_PORT" \
    --access-key "$S3_ACCESS_KEY" --secret-key "$S3_SECRET_KEY" "$S3_DATA" \
    >/tmp/fetcher-s3s-fs.log 2>&1) &
  wait_port s3s-fs "$S3_PORT"
}

# The MQTT mirror's broker (lifecycle §5), and the clients (`mosquitto_sub`) its tests read with:
# a client no one here wrote.
ensure_mosquitto() {
  command -v mosquitto_sub >/dev/null || apt_install mosquitto-clients
  listening 1883 && return 0
  [ -x /usr/sbin/mosquitto ] || apt_install mosquitto
  log "starting Mosquitto"
  # Without a configuration file, Mosquitto 2 listens on the loopback only, anonymous allowed.
  /usr/sbin/mosquitto -d
  wait_port Mosquitto 1883
}

# The PyPI stand-ins' virtual environment, with `package` in it.
venv_install() {
  local package=$1 command=$2
  [ -x "$VENV/bin/$command" ] && return 0
  [ -x "$VENV/bin/pip" ] || { python3 -m venv "$VENV" 2>/dev/null || { apt_install python3-venv && python3 -m venv "$VENV"; }; }
  log "installing $package from PyPI into $VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$package" >&2
}

# MongoDB: secantusdb, a MongoDB wire-compatible server, in replica-set mode (set `secantus`:
# transactions, change streams). Stopped with SIGTERM only: a kill -9 loses unflushed writes.
ensure_mongodb() {
  listening "$MONGO_PORT" && return 0
  venv_install secantusdb secantusd-py
  mkdir -p "$MONGO_DATA"
  log "starting secantusdb on 127.0.0.1:$MONGO_PORT"
  (cd "$MONGO_DATA" && exec nohup "$VENV/bin/secantusd-py" --host 127.0.0.1 --port "$MONGO_PORT" \
    --storage-path "$MONGO_DATA" >/tmp/fetcher-secantusdb.log 2>&1) &
  wait_port secantusdb "$MONGO_PORT"
}

# SQL Server: pysqlbridge, a read-only TDS server that loads its tables from files when it
# starts; each test starts its own on a free port with its own tables, so this only installs it.
ensure_sqlserver() {
  venv_install pysqlbridge pysqlbridge
}

# Go: not a server but Debian's golang-go toolchain, which builds the reference program the JSON
# writer is compared with byte for byte (crates/contract/tests/go_reference); standard library
# only, no modules, nothing downloaded by Go itself.
ensure_go() {
  command -v go >/dev/null && return 0
  apt_install golang-go
  command -v go >/dev/null || { log "golang-go installed but no go on PATH"; return 1; }
}

services=("$@")
[ ${#services[@]} -gt 0 ] || services=(postgres mariadb rabbitmq s3 mosquitto mongodb sqlserver go)
for service in "${services[@]}"; do
  "ensure_$service"
done
