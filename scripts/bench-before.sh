#!/usr/bin/env bash
# Builds the Worker as it was before the result became a stream (issue 17): the release
# `fetcher-worker` of commit BENCH_BEFORE_COMMIT (default 38d6406, the last commit that held the
# whole result in memory), into target/bench-before/. The Worker benchmark runs it as "before"
# when BENCH_BEFORE_BIN names it (`make bench` does). Idempotent: a built binary is kept.
set -euo pipefail

COMMIT=${BENCH_BEFORE_COMMIT:-38d6406}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT="$ROOT/target/bench-before"
BIN="$OUT/fetcher-worker-$COMMIT"

if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$OUT"
SRC="$OUT/src-$COMMIT"
rm -rf "$SRC"
# The commit's tree alone, without a work tree of the repository's own.
git -C "$ROOT" archive --format=tar --prefix="src-$COMMIT/" "$COMMIT" | tar -x -C "$OUT"
echo "bench-before: building fetcher-worker of $COMMIT (release)" >&2
CARGO_TARGET_DIR="$OUT/target" cargo build --release --locked -p worker --bin fetcher-worker \
  --manifest-path "$SRC/Cargo.toml" >&2
cp "$OUT/target/release/fetcher-worker" "$BIN"
rm -rf "$SRC"
echo "$BIN"
