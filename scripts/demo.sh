#!/usr/bin/env bash
# The README's first command. While the Worker is being built, it shows what exists: a master
# key is generated, and fetcherctl derives from it the external HMAC key that event consumers
# are given to verify events and results.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --locked --quiet -p cli
master=$(head -c 32 /dev/urandom | base64)
echo "A fresh master key was generated for this demo (APP_ENC_KEY; never shown)."
APP_ENC_KEY="$master" ./target/debug/fetcherctl derive-key
