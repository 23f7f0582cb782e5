#!/bin/bash
# Resident memory that N idle keep-alive connections cost smart-bff, each after one GET of PATH
# (a large answer, /openapi.yaml, by default). Runs `smart-bff demo` (its own PostgreSQL).
# usage: Benchmarks/idle-memory.sh [BINARY (.build/release/smart-bff)] [N (3000)] [PATH (/openapi.yaml)] [PORT (45400)]
set -euo pipefail
BIN=${1:-.build/release/smart-bff}; N=${2:-3000}; P=${3:-/openapi.yaml}; PORT=${4:-45400}
ulimit -n 20000
W=$(mktemp -d)
"$BIN" demo --port "$PORT" --sandbox-port $((PORT + 10)) > "$W/demo.log" 2>&1 &
DEMO=$!
trap 'kill "${IDLE:-}" 2>/dev/null || true; kill -TERM "$DEMO" 2>/dev/null || true; wait "$DEMO" 2>/dev/null || true; rm -rf "$W"' EXIT
for _ in $(seq 1 150); do curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.2; done
rss() { awk '/VmRSS/{print $2}' "/proc/$DEMO/status"; }
before=$(rss)
python3 "$(dirname "$0")/idle_connections.py" 127.0.0.1 "$PORT" "$N" "$W/ready" "$P" & IDLE=$!
for _ in $(seq 1 600); do [ -s "$W/ready" ] && break; sleep 0.1; done
sleep 1
after=$(rss)
echo "$BIN: $N idle connections after GET $P: RSS $before kB -> $after kB, $(( (after - before) / N )) kB per connection"
