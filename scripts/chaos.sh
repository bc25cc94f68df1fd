#!/usr/bin/env bash
# The reliability run: brings up the servers, runs the chaos soak (3 replicas behind fault
# proxies, RabbitMQ/PostgreSQL/S3 outages, SIGKILLs, cut connections) and, when it exists, the
# hostile-input test, then appends the soak's summary table to RELIABILITY.md with the date and
# the machine. Needs root (it restarts RabbitMQ with rabbitmqctl). Exit code: the tests'.
# Knobs: CHAOS_SEED (42), CHAOS_JOBS (2000), CHAOS_RATE (jobs/s submitted, 25).
set -uo pipefail
cd "$(dirname "$0")/.."

CARGO=${CARGO:-cargo}
LOG=${CHAOS_LOG:-/tmp/fetcher-chaos.log}

bash scripts/services.sh postgres rabbitmq s3 || exit 1

status=0
$CARGO test -p worker --test chaos -- --ignored --nocapture 2>&1 | tee "$LOG"
soak=${PIPESTATUS[0]}
[ "$soak" -eq 0 ] || status=$soak

hostile=skipped
if [ -f crates/worker/tests/hostile/main.rs ] || [ -f crates/worker/tests/hostile.rs ]; then
  $CARGO test -p worker --test hostile -- --include-ignored --nocapture 2>&1 | tee -a "$LOG"
  hostile=${PIPESTATUS[0]}
  [ "$hostile" -eq 0 ] || status=$hostile
  [ "$hostile" -eq 0 ] && hostile=passed || hostile="FAILED (exit $hostile)"
fi

table=$(sed -n '/^CHAOS-SUMMARY-BEGIN$/,/^CHAOS-SUMMARY-END$/p' "$LOG" | sed '1d;$d')
if [ -n "$table" ]; then
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
  [ -f RELIABILITY.md ] || printf '# Reliability\n' > RELIABILITY.md
  grep -q '^## Soak' RELIABILITY.md || cat >> RELIABILITY.md <<'DOC'

## Soak

`make chaos` (`scripts/chaos.sh`) runs `crates/worker/tests/chaos`; its runs follow.
DOC
  run=$(mktemp)
  {
    printf '### Soak run %s — %s CPUs, %s\n\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(nproc)" "${cpu:-unknown CPU}"
    printf 'Soak test exit code %s; hostile-input test: %s.\n\n' "$soak" "$hostile"
    printf '%s\n' "$table"
  } > "$run"
  # The run goes at the end of the "## Soak" section (other sections may follow it).
  awk -v runfile="$run" '
    function dump() { while ((getline line < runfile) > 0) print line; close(runfile); done = 1 }
    /^## / && insoak && !done { dump(); print "" }
    /^## / { insoak = ($0 == "## Soak") }
    { print }
    END { if (!done) { print ""; dump() } }
  ' RELIABILITY.md > RELIABILITY.md.new && mv RELIABILITY.md.new RELIABILITY.md
  rm -f "$run"
  echo "chaos: summary appended to RELIABILITY.md"
else
  echo "chaos: the soak printed no summary (see $LOG)" >&2
  [ "$status" -ne 0 ] || status=1
fi
exit "$status"
