#!/usr/bin/env bash
# RS256 verifications/s through the verifier vs `openssl speed rsa2048` verify/s (one
# thread each, alternating rounds), and the full login latency (EHR launch → callback →
# /session) against the sandbox on loopback.
# Usage: Benchmarks/rs256-and-login.sh [rounds=3] [logins=200]
source "$(dirname "$0")/lib.sh"
ROUNDS=${1:-3}; LOGINS=${2:-200}
(cd "$ROOT" && BFF_BENCHMARKS=1 swift build -c release --scratch-path "${BENCH_SCRATCH:-.build}" --product BFFBench >&2)
BENCH="$ROOT/${BENCH_SCRATCH:-.build}/release/BFFBench"
: > "$WORK/ours"; : > "$WORK/openssl"
for r in $(seq 1 "$ROUNDS"); do
  "$BENCH" rs256 --seconds 5 | awk '{print $2}' >> "$WORK/ours"
  openssl speed -seconds 5 rsa2048 2>/dev/null | awk '/^rsa 2048 bits/ {print int($7)}' >> "$WORK/openssl"
done
ours=$(median < "$WORK/ours"); ref=$(median < "$WORK/openssl")
echo "verifier rs256 verify/s (median) = $ours   [$(tr '\n' ' ' < "$WORK/ours")]"
echo "openssl speed rsa2048 verify/s   = $ref   [$(tr '\n' ' ' < "$WORK/openssl")]"
awk -v a="$ours" -v b="$ref" 'BEGIN { printf "ratio verifier/openssl = %.2f\n", a/b }'
start_postgres
cd "$ROOT" && "$BENCH" login --count "$LOGINS"
