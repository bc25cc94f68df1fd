#!/usr/bin/env bash
# The reliability run (issue 6, items 2-5): brings up the servers, runs the chaos soak
# (3 replicas behind fault proxies, RabbitMQ restarted twice, PostgreSQL restarted, S3 down,
# SIGKILLs, cut connections; every event also mirrored to Mosquitto and checked), the hostile-input tests (the 100,000-message flood, replay and
# scope, secrets, poison) and the fuzz targets, then appends the run's summary (soak table,
# flood figures, fuzz runs) to RELIABILITY.md with the date and the machine. Needs root (it
# restarts RabbitMQ with rabbitmqctl and PostgreSQL with pg_ctlcluster), and the machine to
# itself: other tests sharing these servers would see the restarts. Exit code: non-zero if any
# part failed.
# Knobs: CHAOS_SEED (42), CHAOS_JOBS (2000), CHAOS_RATE (jobs/s submitted, 25),
# CHAOS_FUZZ_SEC (seconds per fuzz target, 60; 0 skips fuzzing), CHAOS_CONTROLS (1; 0 leaves
# out the soak's slow jobs, cancels and deletes), CHAOS_RABBIT_RESTARTS (1; 0 leaves RabbitMQ
# running), CHAOS_S3_OUTAGE (1; 0 leaves S3 up), CHAOS_MANAGER (1; 0 leaves out the soak in the
# Manager mode, whose state is a private MongoDB the test stops and starts instead of PostgreSQL).
set -uo pipefail
cd "$(dirname "$0")/.."

CARGO=${CARGO:-cargo}
LOG=${CHAOS_LOG:-/tmp/fetcher-chaos.log}

bash scripts/services.sh postgres rabbitmq s3 mosquitto mongodb || exit 1

status=0
# The PostgreSQL soak, then (unless CHAOS_MANAGER=0) the Manager mode's, one at a time: each
# restarts servers the other would see go down.
$CARGO test -p worker --test binary -- --ignored --nocapture --skip chaos::manager chaos:: 2>&1 | tee "$LOG"
soak=${PIPESTATUS[0]}
[ "$soak" -eq 0 ] || status=$soak
manager=skipped
if [ "${CHAOS_MANAGER:-1}" != 0 ]; then
  $CARGO test -p worker --test binary -- --ignored --nocapture chaos::manager 2>&1 | tee -a "$LOG"
  manager=${PIPESTATUS[0]}
  [ "$manager" -eq 0 ] || status=$manager
fi

hostile=skipped
if [ -d crates/worker/tests/binary/hostile ]; then
  $CARGO test -p worker --test binary -- --include-ignored --nocapture hostile:: 2>&1 | tee -a "$LOG"
  hostile=${PIPESTATUS[0]}
  [ "$hostile" -eq 0 ] || status=$hostile
  [ "$hostile" -eq 0 ] && hostile=passed || hostile="FAILED (exit $hostile)"
fi

# Fuzzing: cargo-fuzz needs nightly flags; RUSTC_BOOTSTRAP lets the stable toolchain take them.
fuzz_sec=${CHAOS_FUZZ_SEC:-60}
fuzz_rows=""
if [ "$fuzz_sec" -gt 0 ]; then
  command -v cargo-fuzz >/dev/null || $CARGO install cargo-fuzz --locked || status=1
  for target in message_parser signature_verifier json_writer control_request; do
    out=$(cd fuzz && RUSTC_BOOTSTRAP=1 $CARGO fuzz run -O "$target" -- \
      -max_total_time="$fuzz_sec" -rss_limit_mb=2048 2>&1)
    code=$?
    printf '%s\n' "$out" | tail -5 >> "$LOG"
    runs=$(printf '%s\n' "$out" | sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' | tail -1)
    if [ "$code" -eq 0 ]; then verdict="${runs:-?}, no crash"; else verdict="FAILED (exit $code; see $LOG)"; status=1; fi
    fuzz_rows="$fuzz_rows| \`$target\` | $verdict |"$'\n'
  done
fi

# Each soak's table (the Manager mode's, when it ran, after a blank line).
table=$(sed -n '/^CHAOS-SUMMARY-BEGIN$/,/^CHAOS-SUMMARY-END$/p' "$LOG" | sed 's/^CHAOS-SUMMARY-BEGIN$//;/^CHAOS-SUMMARY-END$/d' | sed '1{/^$/d}')
if [ -n "$table" ]; then
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
  [ -f RELIABILITY.md ] || printf '# Reliability\n' > RELIABILITY.md
  grep -q '^## Soak' RELIABILITY.md || cat >> RELIABILITY.md <<'DOC'

## Soak

`make chaos` (`scripts/chaos.sh`) runs `crates/worker/tests/binary/chaos`; its runs follow.
DOC
  run=$(mktemp)
  {
    printf '### Soak run %s — %s CPUs, %s\n\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(nproc)" "${cpu:-unknown CPU}"
    printf 'Soak test exit code %s; Manager-mode soak exit code: %s; hostile-input test: %s.\n\n' "$soak" "$manager" "$hostile"
    printf '%s\n' "$table"
    flood=$(grep '^hostile flood: [0-9]* messages\|^hostile flood: [0-9]* dead-lettered' "$LOG" | sed 's/^hostile flood: /- /')
    [ -z "$flood" ] || printf '\nHostile flood:\n\n%s\n' "$flood"
    if [ -n "$fuzz_rows" ]; then
      printf '\nFuzzing, %s s per target:\n\n| target | result |\n|---|---|\n%s' "$fuzz_sec" "$fuzz_rows"
    fi
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
