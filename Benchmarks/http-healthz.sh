#!/usr/bin/env bash
# GET /healthz on smart-bff vs nginx (one worker, `return 200`) on the same machine, in
# alternating rounds so that both see the same noise. Prints medians and ratios, CPU time
# per request, and memory with 1 000 idle keep-alive connections open.
# Usage: Benchmarks/http-healthz.sh [rounds=5] [seconds=5]
# PERF_DATA=file: also record a perf profile (call graphs) of smart-bff during one extra run
#   (PERF_CALL_GRAPH=dwarf for call graphs through libc and libssl, which lack frame
#   pointers; PERF_FREQ=samples per second, default 4000).
source "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}; SECS=${2:-5}
build_release
start_postgres
BFF_PORT=18181; NGINX_PORT=18282
echo '[{"iss":"http://127.0.0.1:9/fhir","client_id":"bench"}]' > "$WORK/issuers.json"
BFF_LISTEN=127.0.0.1:$BFF_PORT BFF_ISSUERS_FILE=$WORK/issuers.json BFF_LOG_LEVEL=warning \
  BFF_TOKEN_KEY=$(openssl rand -base64 32) "$BFF" serve 2>"$WORK/bff.log" & PIDS+=($!); BFF_PID=$!
cat > "$WORK/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $WORK/nginx.pid; error_log $WORK/nginx-error.log;
events { worker_connections 8192; }
http { access_log off; server { listen 127.0.0.1:$NGINX_PORT;
  location /healthz { default_type application/json; return 200 '{"status":"ok"}'; } } }
NGINX
nginx -c "$WORK/nginx.conf" & PIDS+=($!); NGINX_PID=$!
wait_for_port $BFF_PORT; wait_for_port $NGINX_PORT
NGINX_WORKER=$(pgrep -P "$NGINX_PID" | head -1)
if [ -n "${PERF_DATA:-}" ]; then
  perf record -q --call-graph "${PERF_CALL_GRAPH:-fp}" -F "${PERF_FREQ:-4000}" -p "$BFF_PID" -o "$PERF_DATA" -- sleep "$SECS" 2>/dev/null & perf_pid=$!
  wrk_run "http://127.0.0.1:$BFF_PORT/healthz" "${PERF_CONNS:-64}" "$SECS" >/dev/null; wait $perf_pid
fi

# One run against $1 with $2 connections, with the CPU time and instructions process $3
# spent per request.
measured() { measured_load "$3" wrk_run "$1" "$2" "$SECS"; }

for conns in 64 256; do
  : > "$WORK/bff-$conns"; : > "$WORK/nginx-$conns"
  for r in $(seq 1 "$ROUNDS"); do
    measured "http://127.0.0.1:$BFF_PORT/healthz" "$conns" $BFF_PID >> "$WORK/bff-$conns"
    measured "http://127.0.0.1:$NGINX_PORT/healthz" "$conns" $NGINX_WORKER >> "$WORK/nginx-$conns"
  done
  for who in bff nginx; do
    printf "%-6s c=%-4s rps(median)=%-8s p50ms=%-7s p99ms=%-7s cpu_us/req=%-6s kinsn/req=%s\n" "$who" "$conns" \
      "$(cut -d' ' -f1 "$WORK/$who-$conns" | median)" "$(cut -d' ' -f2 "$WORK/$who-$conns" | median)" \
      "$(cut -d' ' -f3 "$WORK/$who-$conns" | median)" "$(cut -d' ' -f4 "$WORK/$who-$conns" | median)" \
      "$(cut -d' ' -f5 "$WORK/$who-$conns" | median)"
  done
  awk -v b="$(cut -d' ' -f1 "$WORK/bff-$conns" | median)" -v n="$(cut -d' ' -f1 "$WORK/nginx-$conns" | median)" \
    -v c="$conns" 'BEGIN { printf "ratio  c=%-4s smart-bff/nginx = %.2f\n", c, b/n }'
done

# 1 000 idle keep-alive connections: resident memory, and /healthz latency meanwhile.
python3 "$(dirname "$0")/idle_connections.py" 127.0.0.1 $BFF_PORT 1000 "$WORK/idle.ready" & IDLE_PID=$!; PIDS+=($IDLE_PID)
for _ in $(seq 1 100); do [ -f "$WORK/idle.ready" ] && break; sleep 0.1; done
echo "idle   connections=1000 rss_kb=$(awk '/VmRSS/ {print $2}' /proc/$BFF_PID/status) healthz(c=64): $(wrk_run "http://127.0.0.1:$BFF_PORT/healthz" 64 "$SECS" | awk '{printf "rps=%s p50ms=%s p99ms=%s", $1, $2, $3}')"
kill $IDLE_PID 2>/dev/null || true
