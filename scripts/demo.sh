#!/usr/bin/env bash
# The README's first command: brings up what this machine lacks (PostgreSQL, RabbitMQ and an
# S3-compatible server), creates a sample datasource, starts the Worker, submits a signed job,
# waits for its signed `job.completed` event, verifies it, and prints the rows it stored; then
# force-cancels a slow job through the control API and shows its lifecycle events.
set -euo pipefail
cd "$(dirname "$0")/.."

S3_DATA=${S3_DATA:-/var/lib/fetcher-s3}
STATE_DB=fetcher_demo_state
SOURCE_DB=fetcher_demo_source
BUCKET=fetcher-demo
PORT=${DEMO_HEALTH_PORT:-4007}
API_PORT=${DEMO_API_PORT:-4008}
LOG=${TMPDIR:-/tmp}/fetcher-demo-worker.log

step() { printf '\n==> %s\n' "$*"; }

step "Starting the servers the demo needs (installing them if absent)"
bash scripts/services.sh postgres rabbitmq s3 mosquitto

step "Building fetcher-worker and fetcherctl"
cargo build --locked --quiet -p worker -p cli
bin=target/debug

step "Creating the sample datasource ($SOURCE_DB), the state database and the bucket"
psql_admin() { psql -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1 -q "$@"; }
for db in "$STATE_DB" "$SOURCE_DB"; do
  psql_admin -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
done
psql_admin -d "$SOURCE_DB" <<'SQL'
CREATE TABLE payments (id integer PRIMARY KEY, amount numeric(12,2), currency char(3), memo text, settled_at timestamptz);
INSERT INTO payments VALUES
  (1, 125.50, 'BRL', 'invoice <2026-07>', '2026-07-13 18:04:02+00'),
  (2,  80.00, 'USD', 'refund & fee',      '2026-07-13 19:10:00+00'),
  (3,  10.99, 'EUR', 'café',              NULL);
-- A query that takes 60 s: the job the demo cancels.
CREATE VIEW slow AS SELECT id FROM payments, pg_sleep(60);
SQL
mkdir -p "$S3_DATA/$BUCKET"   # s3s-fs keeps a bucket as a directory

export APP_ENC_KEY; APP_ENC_KEY=$(head -c 32 /dev/urandom | base64)
export STREAMING_ENABLED=true STREAMING_CLOUDEVENTS_SOURCE=//lerian/fetcher/demo
export RABBITMQ_JOB_EVENTS_EXCHANGE=fetcher.job.events
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/$STATE_DB
export OBJECT_STORAGE_ENDPOINT=http://127.0.0.1:9000 OBJECT_STORAGE_BUCKET=$BUCKET
export OBJECT_STORAGE_ACCESS_KEY_ID=${S3_ACCESS_KEY:-fetcher} OBJECT_STORAGE_SECRET_KEY=${S3_SECRET_KEY:-fetcher-secret}
export OBJECT_STORAGE_USE_PATH_STYLE=true HEALTH_PORT=$PORT API_PORT=$API_PORT READYZ_DRAIN_DELAY_SEC=1
export DATASOURCE_DEMO_TYPE=POSTGRESQL DATASOURCE_DEMO_HOST=127.0.0.1 DATASOURCE_DEMO_PORT=5432
export DATASOURCE_DEMO_DATABASE=$SOURCE_DB DATASOURCE_DEMO_USER=postgres DATASOURCE_DEMO_SSLMODE=disable
# Jobs on this datasource may read the public schema only (SECURITY.md).
export DATASOURCE_DEMO_SCHEMAS=public
# The IoT-Jobs-shaped mirror of every event on Mosquitto (lifecycle §5).
export MQTT_URL=mqtt://127.0.0.1:1883 MQTT_TOPIC_PREFIX=fetcher-demo

step "Starting the Worker (log: $LOG)"
"$bin/fetcher-worker" >"$LOG" 2>&1 &
worker=$!
cleanup() { kill -TERM "$worker" 2>/dev/null && wait "$worker" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 120); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT" && printf 'GET /readyz HTTP/1.0\r\n\r\n' >&3 && grep -q '"status":"healthy"' <&3) 2>/dev/null; then
    break
  fi
  kill -0 "$worker" 2>/dev/null || { cat "$LOG"; echo "the Worker stopped"; exit 1; }
  sleep 0.5
done
echo "Worker ready on :$PORT (/health, /readyz, /metrics)"

step "Listening for the MQTT mirror's events (fetcher-demo/events/#)"
mirror=$(mktemp)
# Five: the first job's execution and completion, the slow job's cancel in its two phases and
# its execution's cancel.
"$bin/fetcherctl" watch --mqtt "$MQTT_URL" --count 5 --timeout 120 >"$mirror" 2>"$mirror.log" &
mirror_watcher=$!
for _ in $(seq 100); do grep -q "Watching MQTT topics" "$mirror.log" && break; sleep 0.2; done
cat "$mirror.log"

step "Listening for job events (signatures verified with the external HMAC key)"
events=$(mktemp)
"$bin/fetcherctl" watch --count 1 --timeout 60 --json >"$events" 2>"$events.log" &
watcher=$!
for _ in $(seq 100); do grep -q "Watching exchange" "$events.log" && break; sleep 0.2; done
cat "$events.log"

step "Submitting a signed job: demo.payments (id, amount, currency, memo, settled_at)"
submitted=$("$bin/fetcherctl" submit --connection demo --table payments \
  --fields id,amount,currency,memo,settled_at --metadata '{"source":"demo"}')
echo "$submitted"
job_id=$(grep -oE '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}' <<<"$submitted" | head -n1)

wait "$watcher"
tail -n +2 "$events.log"
step "job.completed received"
cat "$events"
hmac=$(python3 -c 'import json,sys; e=json.loads(open(sys.argv[1]).readline()); b=e.get("body",e); print(b["result"]["hmac"])' "$events")

step "Fetching, decrypting and verifying the stored result"
"$bin/fetcherctl" fetch --job "$job_id" --hmac "$hmac"
echo

step "Canceling a slow job (demo.slow, a 60 s query) through the control API, with --force"
"$bin/fetcherctl" watch --count 2 --timeout 60 >"$events" 2>"$events.log" &
watcher=$!
for _ in $(seq 100); do grep -q "Watching exchange" "$events.log" && break; sleep 0.2; done
submitted=$("$bin/fetcherctl" submit --connection demo --table slow --fields id --metadata '{"source":"demo"}')
echo "$submitted"
slow_id=$(grep -oE '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}' <<<"$submitted" | head -n1)
api=(--api "http://127.0.0.1:$API_PORT")
for _ in $(seq 100); do
  "$bin/fetcherctl" status "$slow_id" "${api[@]}" 2>/dev/null | grep -q ": processing" && break
  sleep 0.2
done
"$bin/fetcherctl" status "$slow_id" "${api[@]}"
"$bin/fetcherctl" cancel "$slow_id" --force --comment "demo: a runaway query" "${api[@]}"
wait "$watcher"
step "job.cancellation_in_progress and job.canceled received (signatures verified)"
cat "$events"
"$bin/fetcherctl" status "$slow_id" "${api[@]}" | tee "$events.status"
grep -q ": canceled" "$events.status"

wait "$mirror_watcher"
step "The same events on the MQTT mirror (topic, then the IoT Jobs payload)"
cat "$mirror"
grep -q "/events/job/$slow_id/canceled" "$mirror"

step "Done: the event's signature and the result's HMAC verified; the slow job was canceled."
