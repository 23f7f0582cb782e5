#!/usr/bin/env bash
# GET /fhir/Patient/bench through smart-bff (a real session) vs the same request through
# nginx proxy_pass (keep-alive upstream), both to one upstream nginx serving a fixed ~2 KB
# FHIR JSON; plus the upstream directly, for the added latency. The sandbox sits behind the
# upstream nginx for the SMART login. Alternating rounds; medians and ratios.
# Usage: Benchmarks/fhir-proxy.sh [connections=32] [seconds=5] [rounds=3]
# UPSTREAM_FIELDS=many: the EHR's response head has 22 fields, not nginx's 8 (see lib.sh).
# BROWSER_FIELDS=1: each request carries a browser's fetch() fields too, 16 in all (see lib.sh).
# PERF_DATA=file: also record a perf profile (call graphs) of smart-bff during one extra run
#   (PERF_CALL_GRAPH=dwarf for call graphs through libc and libssl, which lack frame
#   pointers; PERF_FREQ=samples per second, default 4000; PERF_EVENT=event records that event
#   instead of CPU cycles, every occurrence, e.g. probe_libc:malloc for where allocations come from,
#   after perf probe -x <libc> malloc).
# LATENCY_DETAIL=1: also one extra run through smart-bff printing p50, p90, p99, p99.9 and max.
# MALLOC_COUNT=1: also one extra run counting smart-bff's malloc calls per proxied request
#   (perf uprobe on libc's malloc; root). COUNT_EVENTS="event ...": also those perf events
#   per request (e.g. uprobes made with perf probe -x <library> <function>).
# COMPARE_BINARY=path: also run that smart-bff build ("alt": same database, same session)
#   in every round, right after this one: an A/B of two builds on the same machine state.
# COMPARE_ENV="NAME=value ...": extra environment for the alt process only (for a spike
#   build's switches, e.g. Benchmarks/spikes/audit-modes.patch's BENCH_AUDIT_MODE=off).
# PG_EXTRA_OPTS="-c name=value ...": extra settings for the throwaway PostgreSQL.
# PACE_MS=n (default 5; 0 skips): also paced rounds, where each connection waits n ms between
#   a response and its next request, so that the offered load (about CONNS x 1000/n requests/s)
#   stays well below every path's capacity. Their latency is a request's own time through each
#   path; the saturated rounds' latency is mostly the queue that saturation builds (there p50 is
#   about CONNS / requests/s), so it follows throughput.
# NGINX_PROXY=own: the reference proxy runs as an nginx of its own (one worker) instead of a
#   server block of the EHR's nginx. Then no process serves both sides of a proxied request
#   (as with smart-bff, each request crosses from the proxy's process to the EHR's and back),
#   and the nginx row's CPU per request is its proxying alone.
# TLS=1: the EHR (upstream nginx, sandbox behind it) is https with a certificate from a
#   throwaway CA, trusted by smart-bff (BFF_TLS_CA_FILE) and by the nginx proxy (verified,
#   keep-alive, sessions reused); "direct" stays plain http to the same server.
source "$(dirname "$0")/lib.sh"
CONNS=${1:-32}; SECS=${2:-5}; ROUNDS=${3:-3}
build_release
start_postgres
UP=18301; PROXY=18302; SANDBOX=18303; BFF_PORT=18304; UP_TLS=18306
# The EHR as smart-bff and the nginx proxy reach it.
EHR="http://127.0.0.1:$UP"; UP_LISTEN_TLS=""; PROXY_PASS="proxy_pass http://fhir;"
if [ -n "${TLS:-}" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=bench CA" \
    -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$WORK/ehr.key" -out "$WORK/ehr.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$WORK/ehr.ext"
  openssl x509 -req -in "$WORK/ehr.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial -days 2 \
    -extfile "$WORK/ehr.ext" -out "$WORK/ehr.pem" 2>/dev/null
  chmod 644 "$WORK"/*.pem "$WORK"/*.key
  EHR="https://127.0.0.1:$UP_TLS"
  UP_LISTEN_TLS="listen 127.0.0.1:$UP_TLS ssl; ssl_certificate $WORK/ehr.pem; ssl_certificate_key $WORK/ehr.key;"
  PROXY_PASS="proxy_pass https://fhir_tls; proxy_ssl_verify on; proxy_ssl_trusted_certificate $WORK/ca.pem; proxy_ssl_name localhost; proxy_ssl_session_reuse on;"
  export BFF_TLS_CA_FILE=$WORK/ca.pem CURL_CA_BUNDLE=$WORK/ca.pem
fi
write_bench_patient "$WORK/patient.json"
echo "upstream body: $(wc -c < "$WORK/patient.json") bytes"
PROXY_BLOCK="
  upstream fhir { server 127.0.0.1:$UP; keepalive 64; }
  upstream fhir_tls { server 127.0.0.1:$UP_TLS; keepalive 64; }
  server { listen 127.0.0.1:$PROXY;
    location / { $PROXY_PASS proxy_http_version 1.1; proxy_set_header Connection \"\"; } }"
if [ "${NGINX_PROXY:-}" = own ]; then
  write_ehr_nginx_conf "$UP_LISTEN_TLS"
  printf 'worker_processes 1; daemon off; pid %s/proxy.pid; error_log %s/proxy-error.log;\nevents { worker_connections 8192; }\nhttp { access_log off; %s\n}\n' \
    "$WORK" "$WORK" "$PROXY_BLOCK" > "$WORK/proxy.conf"
  nginx -c "$WORK/proxy.conf" & PIDS+=($!)
else
  write_ehr_nginx_conf "$UP_LISTEN_TLS" "$PROXY_BLOCK"
fi
nginx -c "$WORK/nginx.conf" & PIDS+=($!)
"$BFF" sandbox --port $SANDBOX --public-url "$EHR" --client-id bench --redirect-uri "http://127.0.0.1:$BFF_PORT/callback" \
  >/dev/null 2>&1 & PIDS+=($!)
echo "[{\"iss\":\"$EHR/fhir\",\"client_id\":\"bench\"}]" > "$WORK/issuers.json"
TOKEN_KEY=$(openssl rand -base64 32)
BFF_LISTEN=127.0.0.1:$BFF_PORT BFF_ISSUERS_FILE=$WORK/issuers.json BFF_LOG_LEVEL=warning BFF_TOKEN_KEY=$TOKEN_KEY \
  "$BFF" serve 2>"$WORK/bff.log" & PIDS+=($!); BFF_PID=$!
wait_for_port $UP; wait_for_port $PROXY; wait_for_port $SANDBOX; wait_for_port $BFF_PORT
ALT_PORT=18305; WHO="bff nginx direct"
if [ -n "${COMPARE_BINARY:-}" ]; then
  BFF_LISTEN=127.0.0.1:$ALT_PORT BFF_ISSUERS_FILE=$WORK/issuers.json BFF_LOG_LEVEL=warning BFF_TOKEN_KEY=$TOKEN_KEY \
    env ${COMPARE_ENV:-} "$COMPARE_BINARY" serve 2>"$WORK/alt.log" & PIDS+=($!); ALT_PID=$!
  wait_for_port $ALT_PORT; WHO="bff alt nginx direct"
fi
sign_in "$BFF_PORT" "$EHR"
if [ -n "${LATENCY_DETAIL:-}" ]; then
  # One extra run through smart-bff, with wrk's latency percentiles up to the maximum.
  cat > "$WORK/detail.lua" <<LUA
$(cat "$WORK/headers.lua")
done = function(summary, latency, requests)
  for _, p in ipairs({50, 90, 99, 99.9}) do io.write(string.format("p%s=%.2fms ", p, latency:percentile(p) / 1000)) end
  io.write(string.format("max=%.2fms\\n", latency.max / 1000))
end
LUA
  echo "latency detail (smart-bff): $(wrk -t2 -c"$CONNS" -d"${SECS}s" -s "$WORK/detail.lua" "http://127.0.0.1:$BFF_PORT/fhir/Patient/bench" | tail -1)"
fi
if [ -n "${MALLOC_COUNT:-}" ]; then
  # One extra run through smart-bff, counting its malloc calls (a uprobe) and its read()
  # calls (the server reads each request with one; the client's upstream reads are recv, and
  # the own client's idle check another) over the same window: allocations per request, a
  # count that does not depend on the machine's noise the way requests/s do.
  perf probe -q -x "$(ldconfig -p | awk '/libc.so.6 .*x86-64/ { print $NF; exit }')" malloc 2>/dev/null || true
  wrk -t2 -c"$CONNS" -d"${SECS}s" -s "$WORK/headers.lua" "http://127.0.0.1:$BFF_PORT/fhir/Patient/bench" >/dev/null & wrk_pid=$!
  sleep 1
  extra=""; for e in ${COUNT_EVENTS:-}; do extra="$extra -e $e"; done
  counts=$(perf stat -x, -e probe_libc:malloc -e syscalls:sys_enter_read $extra -p "$BFF_PID" -- sleep "$((SECS > 3 ? SECS - 2 : 1))" 2>&1)
  wait $wrk_pid
  echo "$counts" | awk -F, '/malloc/ { m = $1 } /sys_enter_read/ { r = $1 } END { printf "allocations per proxied request: %.1f (%s malloc calls, %s request reads)\n", m / r, m, r }'
  for e in ${COUNT_EVENTS:-}; do
    echo "$counts" | awk -F, -v e="$e" '/sys_enter_read/ { r = $1 } $3 == e { n = $1 } END { printf "%s per proxied request: %.2f\n", e, n / r }'
  done
fi
NGINX_PID=$(cat "$WORK/nginx.pid" 2>/dev/null || true)
# The EHR's worker; unless NGINX_PROXY=own, the proxying server block is in it too (then the
# proxy runs' CPU per request holds the upstream side of them as well).
NGINX_WORKER=$(pgrep -P "$NGINX_PID" | head -1)
PROXY_WORKER=$NGINX_WORKER
[ "${NGINX_PROXY:-}" != own ] || PROXY_WORKER=$(pgrep -P "$(cat "$WORK/proxy.pid")" | head -1)
run() { wrk -t2 -c"$CONNS" -d"${SECS}s" --latency -s "$WORK/headers.lua" "$1" | awk '
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    /Requests\/sec/ { rps=$2 } $1=="50%" { p50=ms($2) } $1=="99%" { p99=ms($2) } /Non-2xx/ { bad=$4 }
    END { printf "%.0f %.3f %.3f %s\n", rps, p50, p99, bad+0 }'; }
# cpu_us/req (of it, the kernel's) and kinsn/req (thousands of instructions retired per request): smart-bff's own for
# bff; for nginx, the proxying worker's (with the upstream side too, unless NGINX_PROXY=own);
# the EHR's worker serving directly for direct.
for who in $WHO; do : > "$WORK/$who"; done
if [ -n "${PERF_DATA:-}" ]; then
  if [ -n "${PERF_EVENT:-}" ]; then sampling=(-e "$PERF_EVENT" -c 1); else sampling=(-F "${PERF_FREQ:-4000}"); fi
  perf record -q --call-graph "${PERF_CALL_GRAPH:-fp}" "${sampling[@]}" -p "$BFF_PID" -o "$PERF_DATA" -- sleep "$SECS" 2>/dev/null & perf_pid=$!
  run "http://127.0.0.1:$BFF_PORT/fhir/Patient/bench" >/dev/null; wait $perf_pid
fi
# One run against $1, with the CPU time and instructions process $2 spent per request, and
# the CPU time PostgreSQL spent per request meanwhile (the audit trail's writes).
measured() {
  local p0 out; p0=$(pg_cpu_seconds); out=$(measured_load "$2" run "$1")
  echo "$out $(awk -v a="$p0" -v b="$(pg_cpu_seconds)" -v o="$out" -v s="$SECS" 'BEGIN { split(o, x, " "); printf "%.2f", (b-a)*1e6/(x[1]*s) }')"
}
for r in $(seq 1 "$ROUNDS"); do
  measured "http://127.0.0.1:$BFF_PORT/fhir/Patient/bench" "$BFF_PID" >> "$WORK/bff"
  [ -z "${ALT_PID:-}" ] || measured "http://127.0.0.1:$ALT_PORT/fhir/Patient/bench" "$ALT_PID" >> "$WORK/alt"
  measured "http://127.0.0.1:$PROXY/fhir/Patient/bench" "$PROXY_WORKER" >> "$WORK/nginx"
  measured "http://127.0.0.1:$UP/fhir/Patient/bench" "$NGINX_WORKER" >> "$WORK/direct"
done
for who in $WHO; do
  printf "%-6s c=%s rps=%-8s p50ms=%-7s p99ms=%-7s non2xx=%-3s cpu_us/req=%-6s (kernel %-6s) db_us/req=%-6s kinsn/req=%s\n" "$who" "$CONNS" "$(cut -d' ' -f1 "$WORK/$who" | median)" \
    "$(cut -d' ' -f2 "$WORK/$who" | median)" "$(cut -d' ' -f3 "$WORK/$who" | median)" "$(cut -d' ' -f4 "$WORK/$who" | paste -sd+ | bc)" \
    "$(cut -d' ' -f5 "$WORK/$who" | median)" "$(cut -d' ' -f7 "$WORK/$who" | median)" "$(cut -d' ' -f8 "$WORK/$who" | median)" "$(cut -d' ' -f6 "$WORK/$who" | median)"
done
b=$(cut -d' ' -f1 "$WORK/bff" | median); n=$(cut -d' ' -f1 "$WORK/nginx" | median)
awk -v b="$b" -v n="$n" 'BEGIN { printf "ratio smart-bff/nginx-proxy = %.2f\n", b/n }'
[ -z "${ALT_PID:-}" ] || awk -v b="$b" -v a="$(cut -d' ' -f1 "$WORK/alt" | median)" -v n="$n" \
  'BEGIN { printf "ratio alt/nginx-proxy = %.2f, alt/smart-bff = %.2f\n", a/n, a/b }'
awk -v a="$(cut -d' ' -f2 "$WORK/bff" | median)" -v d="$(cut -d' ' -f2 "$WORK/direct" | median)" \
    -v a99="$(cut -d' ' -f3 "$WORK/bff" | median)" -v d99="$(cut -d' ' -f3 "$WORK/direct" | median)" \
    -v n="$(cut -d' ' -f2 "$WORK/nginx" | median)" -v n99="$(cut -d' ' -f3 "$WORK/nginx" | median)" \
    'BEGIN { printf "added latency over direct: p50 %.3f ms, p99 %.3f ms (nginx proxy: p50 %.3f ms, p99 %.3f ms)\n", a-d, a99-d99, n-d, n99-d99 }'

PACE_MS=${PACE_MS:-5}
if [ "$PACE_MS" != 0 ]; then
  { cat "$WORK/headers.lua"; echo "delay = function() return $PACE_MS end"; } > "$WORK/paced.lua"
  paced() { wrk -t2 -c"$CONNS" -d"${SECS}s" --latency -s "$WORK/paced.lua" "$1" | awk '
      function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
      /Requests\/sec/ { rps=$2 } $1=="50%" { p50=ms($2) } $1=="99%" { p99=ms($2) } /Non-2xx/ { bad=$4 }
      END { printf "%.0f %.3f %.3f %s\n", rps, p50, p99, bad+0 }'; }
  for who in bff nginx direct; do : > "$WORK/paced-$who"; done
  for r in $(seq 1 "$ROUNDS"); do
    paced "http://127.0.0.1:$BFF_PORT/fhir/Patient/bench" >> "$WORK/paced-bff"
    paced "http://127.0.0.1:$PROXY/fhir/Patient/bench" >> "$WORK/paced-nginx"
    paced "http://127.0.0.1:$UP/fhir/Patient/bench" >> "$WORK/paced-direct"
  done
  for who in bff nginx direct; do
    printf "paced %-6s c=%s pause=%sms rps=%-7s p50ms=%-7s p99ms=%-7s non2xx=%s\n" "$who" "$CONNS" "$PACE_MS" "$(cut -d' ' -f1 "$WORK/paced-$who" | median)" \
      "$(cut -d' ' -f2 "$WORK/paced-$who" | median)" "$(cut -d' ' -f3 "$WORK/paced-$who" | median)" "$(cut -d' ' -f4 "$WORK/paced-$who" | paste -sd+ | bc)"
  done
  awk -v a="$(cut -d' ' -f2 "$WORK/paced-bff" | median)" -v d="$(cut -d' ' -f2 "$WORK/paced-direct" | median)" \
      -v a99="$(cut -d' ' -f3 "$WORK/paced-bff" | median)" -v d99="$(cut -d' ' -f3 "$WORK/paced-direct" | median)" \
      -v n="$(cut -d' ' -f2 "$WORK/paced-nginx" | median)" -v n99="$(cut -d' ' -f3 "$WORK/paced-nginx" | median)" \
      'BEGIN { printf "paced: added latency over direct: p50 %.3f ms, p99 %.3f ms (nginx proxy: p50 %.3f ms, p99 %.3f ms)\n", a-d, a99-d99, n-d, n99-d99 }'
fi
