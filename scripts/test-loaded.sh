#!/usr/bin/env bash
# Runs the Swift test suite while BUSY (default 4) busy loops compete for the CPU, as on a
# loaded CI machine: a test that passes alone but fails here waits for time, not for what
# it needs. Usage: scripts/test-loaded.sh [busy loops] [swift test arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUSY=${1:-4}; shift || true
swift build --build-tests >&2
swift build --product smart-bff >&2 # the two-process refresh test runs the binary
pids=()
for _ in $(seq 1 "$BUSY"); do (while :; do :; done) & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
swift test --skip-build "$@"
