# Shared helpers for the benchmark scripts (sourced, not run).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_BIN=/usr/lib/postgresql/15/bin
WORK=$(mktemp -d /tmp/smart-bff-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  if [ -d "$WORK/pg" ]; then as_postgres "$PG_BIN/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# Starts a throwaway PostgreSQL on a Unix socket in $WORK; sets DATABASE_URL.
start_postgres() {
  mkdir -p "$WORK/pg" "$WORK/sock"
  [ "$(id -u)" = 0 ] && chown postgres "$WORK" "$WORK/pg" "$WORK/sock"
  as_postgres "$PG_BIN/initdb" -D "$WORK/pg" -U postgres -A trust >/dev/null
  as_postgres "$PG_BIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w \
    -o "-k $WORK/sock -c listen_addresses='' -p 5432 -c max_connections=200 ${PG_EXTRA_OPTS:-}" start >/dev/null
  export DATABASE_URL="postgresql:///postgres?host=$WORK/sock&port=5432&user=postgres"
  PG_SOCK="$WORK/sock"
}

build_release() {
  if [ -n "${BFF_BINARY:-}" ]; then BFF=$BFF_BINARY; return; fi # A/B runs of builds kept aside
  (cd "$ROOT" && swift build -c release --scratch-path "${BENCH_SCRATCH:-.build}" --product smart-bff >&2)
  BFF="$ROOT/${BENCH_SCRATCH:-.build}/release/smart-bff"; return
}

# Busy CPU seconds (user+system) of a process, from /proc/PID/stat.
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"
}

# Of those, the seconds spent in the kernel on the process's behalf (system calls, the
# loopback TCP they run, page faults).
system_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ print $15 / hz }' "/proc/$1/stat"
}

# Busy CPU seconds of the throwaway PostgreSQL (the postmaster, its live backends, and the
# backends that have exited, which the postmaster's cutime/cstime hold): what the database
# spends on smart-bff's behalf, which /proc/PID/stat of smart-bff does not show.
pg_cpu_seconds() {
  local pm; pm=$(head -1 "$WORK/pg/postmaster.pid")
  { echo "$pm"; pgrep -P "$pm"; } | while read -r p; do cat "/proc/$p/stat" 2>/dev/null || true; done |
    awk -v hz="$(getconf CLK_TCK)" -v pm="$pm" '{ me = $1; sub(/^.*\) /, ""); s += $12 + $13; if (me == pm) s += $14 + $15 } END { print s / hz }'
}

# Counts the instructions process $1 retires during $2 seconds (hardware counter; prints
# n/a where perf cannot count, as on virtual machines without a PMU). Run in the background
# beside the load; far steadier than CPU time on a noisy machine, so it is the figure to
# compare code changes by.
count_instructions() {
  perf stat -x, -e instructions -p "$1" -- sleep "$2" 2>&1 >/dev/null | awk -F, '$3 ~ /^instructions/ && $1 ~ /^[0-9]+$/ { n = $1 } END { print (n == "" ? "n/a" : n) }'
}

# Runs "$@" (one load run that prints its requests/s first, over $SECS seconds) while
# watching process $1; prints the run's line, then the CPU microseconds, the thousands of
# instructions, and the kernel's CPU microseconds that process spent per request.
measured_load() {
  local pid=$1 c0 c1 k0 k1 out insn; shift
  c0=$(cpu_seconds "$pid"); k0=$(system_seconds "$pid")
  count_instructions "$pid" "$SECS" > "$WORK/insn" &
  out=$("$@"); c1=$(cpu_seconds "$pid"); k1=$(system_seconds "$pid"); wait $!; insn=$(cat "$WORK/insn")
  echo "$out $(awk -v a="$c0" -v b="$c1" -v ka="$k0" -v kb="$k1" -v o="$out" -v s="$SECS" -v i="$insn" 'BEGIN {
    split(o, x, " "); n = x[1] * s; printf "%.2f ", (b-a)*1e6/n
    if (i == "n/a") printf "n/a "; else printf "%.2f ", i/n/1000
    printf "%.2f\n", (kb-ka)*1e6/n }')"
}

wait_for_port() {
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "port $1 did not open" >&2; return 1
}

# wrk run → "rps p50 p99" (latencies in ms).
wrk_run() {
  local url=$1 conns=$2 secs=$3
  wrk -t2 -c"$conns" -d"${secs}s" --latency "$url" | awk '
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    /Requests\/sec/ { rps=$2 } $1=="50%" { p50=ms($2) } $1=="99%" { p99=ms($2) }
    END { printf "%.0f %.3f %.3f\n", rps, p50, p99 }'
}

median() { sort -n | awk '{ a[NR]=$1 } END { if (a[1] !~ /^[0-9.]+$/) print a[1]; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'; }

# Signs in through smart-bff on port $1 (a standalone launch against the sandbox EHR at $2,
# approving patient pat-1) with curl; sets COOKIE ("bff_session=…") and LAUNCH, checks that
# GET /fhir/Patient/bench answers 200 with them, and writes $WORK/headers.lua, the wrk
# script that sends them (with X-CSRF).
sign_in() {
  local port=$1 ehr=$2 jar=$WORK/cookies auth approve callback final check
  auth=$(curl -s -o /dev/null -w '%{redirect_url}' -c "$jar" "http://127.0.0.1:$port/login")
  approve=$(curl -s "$auth" | grep -o 'href="/authorize/approve[^"]*pat-1"' | head -1 | sed 's/^href="//; s/"$//; s/&amp;/\&/g')
  callback=$(curl -s -o /dev/null -w '%{redirect_url}' "$ehr$approve")
  final=$(curl -s -o /dev/null -w '%{redirect_url}' -b "$jar" -c "$jar" "$callback")
  LAUNCH=${final##*bff_launch=}
  COOKIE=$(awk '$6 == "bff_session" {print "bff_session=" $7}' "$jar")
  check=$(curl -s -o /dev/null -w '%{http_code}' -H "Cookie: $COOKIE" -H "X-CSRF: 1" -H "X-BFF-Launch: $LAUNCH" "http://127.0.0.1:$port/fhir/Patient/bench")
  [ "$check" = 200 ] || { echo "login failed ($check) launch=$LAUNCH cookie=${COOKIE:0:20}"; curl -s -H "Cookie: $COOKIE" -H "X-CSRF: 1" -H "X-BFF-Launch: $LAUNCH" "http://127.0.0.1:$port/fhir/Patient/bench"; echo; echo "$auth" | head -c 300; echo; echo "$callback" | head -c 200; exit 1; }
  cat > "$WORK/headers.lua" <<LUA
wrk.headers["Cookie"] = "$COOKIE"
wrk.headers["X-CSRF"] = "1"
wrk.headers["X-BFF-Launch"] = "$LAUNCH"
LUA
  # BROWSER_FIELDS=1: also what a browser's fetch() sends besides (Chrome 131's fields for a
  # same-origin GET): 16 fields in all instead of 4.
  if [ -n "${BROWSER_FIELDS:-}" ]; then
    cat >> "$WORK/headers.lua" <<'LUA'
wrk.headers["User-Agent"] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
wrk.headers["Accept"] = "application/fhir+json"
wrk.headers["Accept-Language"] = "en-US,en;q=0.9"
wrk.headers["Accept-Encoding"] = "gzip, deflate, br, zstd"
wrk.headers["Referer"] = "https://app.example.org/patients/chart?tab=summary"
wrk.headers["sec-ch-ua"] = "\"Google Chrome\";v=\"131\", \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\""
wrk.headers["sec-ch-ua-mobile"] = "?0"
wrk.headers["sec-ch-ua-platform"] = "\"Windows\""
wrk.headers["Sec-Fetch-Site"] = "same-origin"
wrk.headers["Sec-Fetch-Mode"] = "cors"
wrk.headers["Sec-Fetch-Dest"] = "empty"
wrk.headers["Priority"] = "u=1, i"
LUA
  fi
}

# Writes the benchmarks' upstream body, a fixed 1 398-byte FHIR Patient, to $1 (readable by
# nginx's workers, as is its folder).
write_bench_patient() {
  python3 - "$1" <<'PY'
import json, sys
p = {"resourceType": "Patient", "id": "bench", "meta": {"versionId": "1", "lastUpdated": "2026-11-01T09:00:00Z"},
     "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">" + "Benchmark patient " * 60 + "</div>"},
     "name": [{"use": "official", "family": "Bench", "given": ["Mark"]}], "gender": "other", "birthDate": "1970-01-01"}
open(sys.argv[1], "w").write(json.dumps(p))
PY
  chmod 755 "$(dirname "$1")"; chmod 644 "$1"
}

# Writes $WORK/nginx.conf for one nginx worker that is the EHR at 127.0.0.1:$UP: the bench
# Patient (write_bench_patient's $WORK/patient.json) at /fhir/Patient/bench, everything else
# (the SMART login, other FHIR reads) from the sandbox at 127.0.0.1:$SANDBOX, unbuffered.
# $1: more directives for the EHR's server (e.g. a TLS listen); $2: more for the http block
# (e.g. a proxying server).
# UPSTREAM_FIELDS=many: the Patient's response head also carries 14 more fields, as an EHR's
# behind its gateways does (security, CORS, caching, tracing, a load balancer's cookie): 22
# fields in all instead of nginx's 8.
write_ehr_nginx_conf() {
  local fields=""
  if [ "${UPSTREAM_FIELDS:-}" = many ]; then
    fields='add_header Strict-Transport-Security "max-age=31536000; includeSubDomains" always;
      add_header X-Content-Type-Options nosniff always; add_header X-Frame-Options DENY always;
      add_header Content-Security-Policy "default-src '"'"'none'"'"'; frame-ancestors '"'"'none'"'"'" always;
      add_header Cache-Control "no-cache, no-store, must-revalidate" always; add_header Pragma no-cache always;
      add_header Expires 0 always; add_header Vary "Accept, Accept-Encoding, Origin" always;
      add_header Access-Control-Allow-Origin "https://app.example.org" always;
      add_header Access-Control-Expose-Headers "Location, Content-Location, ETag, Last-Modified" always;
      add_header X-Request-Id "3f9a1c2e-7b4d-4e8a-9c1f-5d6e7a8b9c0d" always;
      add_header traceparent "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" always;
      add_header Set-Cookie "AWSALB=Qm9ndXMgbG9hZCBiYWxhbmNlciBjb29raWUgdmFsdWU; Expires=Fri, 04 Dec 2026 10:00:00 GMT; Path=/" always;
      add_header Server-Timing "app;dur=12.3, db;dur=4.5" always;'
  fi
  cat > "$WORK/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $WORK/nginx.pid; error_log $WORK/nginx-error.log;
events { worker_connections 8192; }
http {
  access_log off;
  upstream sandbox { server 127.0.0.1:$SANDBOX; keepalive 32; }
  server { listen 127.0.0.1:$UP; ${1:-}
    location = /fhir/Patient/bench { default_type application/fhir+json; alias $WORK/patient.json; $fields }
    location / { proxy_pass http://sandbox; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Host \$host:\$server_port;
                 proxy_buffering off; } }
  ${2:-}
}
NGINX
}
