#!/usr/bin/env bash
# smart-bff's memory, descriptors and threads under sustained /fhir load: does anything grow
# that should not? wrk reads a small Patient (from nginx, as in fhir-proxy.sh) over CONNS
# keep-alive connections, while Benchmarks/soak_mix.py cycles through everything else a
# front end sends (searches and their next pages, a 3 MB stream, a 16 MB stream the client
# leaves after 64 KiB, a client that leaves before its answer, 304, 404, 400, 401, 403, 405)
# against the sandbox EHR behind the same nginx, checking every status. Samples smart-bff's
# resident memory, descriptors and threads every SAMPLE seconds, and once more after the
# load has stopped.
# Usage: Benchmarks/proxy-soak.sh [minutes=10] [connections=24] [sample seconds=30]
# HEAPTRACK=file: run smart-bff under heaptrack (Debian's package), stop it at the end, and
#   print its heap summary (allocations, peak heap, bytes never freed by the exit, the live
#   heap minute by minute); slower.
source "$(dirname "$0")/lib.sh"
MINUTES=${1:-10}; CONNS=${2:-24}; SAMPLE=${3:-30}
SECS=$((MINUTES * 60))
build_release
start_postgres
UP=18311; SANDBOX=18313; BFF_PORT=18314
EHR="http://127.0.0.1:$UP"
write_bench_patient "$WORK/patient.json"
write_ehr_nginx_conf
nginx -c "$WORK/nginx.conf" & PIDS+=($!)
"$BFF" sandbox --port $SANDBOX --public-url "$EHR" --client-id bench --redirect-uri "http://127.0.0.1:$BFF_PORT/callback" \
  >/dev/null 2>&1 & PIDS+=($!)
echo "[{\"iss\":\"$EHR/fhir\",\"client_id\":\"bench\"}]" > "$WORK/issuers.json"
BFF_LISTEN=127.0.0.1:$BFF_PORT BFF_ISSUERS_FILE=$WORK/issuers.json BFF_LOG_LEVEL=warning BFF_TOKEN_KEY=$(openssl rand -base64 32) \
  ${HEAPTRACK:+heaptrack -o "$HEAPTRACK"} "$BFF" serve 2>"$WORK/bff.log" & PIDS+=($!); BFF_PID=$!
if [ -n "${HEAPTRACK:-}" ]; then # heaptrack's script runs smart-bff as its child
  WRAPPER_PID=$BFF_PID; for _ in $(seq 1 100); do BFF_PID=$(pgrep -P "$WRAPPER_PID" -f "^$BFF serve") && break; sleep 0.1; done
  PIDS+=("$BFF_PID")
fi
wait_for_port $UP; wait_for_port $SANDBOX; wait_for_port $BFF_PORT
sign_in "$BFF_PORT" "$EHR"

# One sample: seconds since the load began, requests answered so far (smart-bff's own
# counter), resident MB (all; anonymous, i.e. heap and stacks; file-backed, i.e. code and
# libraries paged in), peak resident MB, open descriptors, threads.
sample() {
  local requests
  requests=$(curl -s "http://127.0.0.1:$BFF_PORT/metrics" | awk '/^bff_http_requests_total/ { n += $NF } END { printf "%d", n }')
  awk -v t="$1" -v r="$requests" -v fds="$(ls "/proc/$BFF_PID/fd" | wc -l)" '
    /^VmRSS/ { rss = $2 } /^RssAnon/ { anon = $2 } /^RssFile/ { file = $2 } /^VmHWM/ { hwm = $2 } /^Threads/ { th = $2 }
    END { printf "%-8s %-10s %-7.1f %-7.1f %-7.1f %-7.1f %-5s %s\n", t, r, rss / 1024, anon / 1024, file / 1024, hwm / 1024, fds, th }' "/proc/$BFF_PID/status"
}

echo "load: wrk -c$CONNS on /fhir/Patient/bench and soak_mix.py (4 threads) for $MINUTES min; a sample every ${SAMPLE} s"
printf "%-8s %-10s %-7s %-7s %-7s %-7s %-5s %s\n" seconds requests rss_mb anon_mb file_mb hwm_mb fds threads
sample before
wrk -t2 -c"$CONNS" -d"${SECS}s" -s "$WORK/headers.lua" "http://127.0.0.1:$BFF_PORT/fhir/Patient/bench" > "$WORK/wrk.out" & wrk_pid=$!
python3 "$ROOT/Benchmarks/soak_mix.py" "$BFF_PORT" "$COOKIE" "$LAUNCH" "$SECS" > "$WORK/mix.out" & mix_pid=$!
start=$(date +%s)
while kill -0 "$wrk_pid" 2>/dev/null; do
  sleep "$SAMPLE"
  kill -0 "$wrk_pid" 2>/dev/null && sample "$(( $(date +%s) - start ))" | tee -a "$WORK/samples"
done
wait "$wrk_pid"; wait "$mix_pid"
sleep 65   # past the upstream connections' idle timeout
sample after
echo "wrk: $(awk '/requests in/ { print $1, "requests" } /Non-2xx/ { print "non-2xx:", $NF }' "$WORK/wrk.out" | paste -sd' ')"
echo "mix: $(cat "$WORK/mix.out")"
# Growth under load: the first minute is warm-up (pools fill, malloc's arenas settle), so
# from the first sample after it: the range of anonymous memory (heap and stacks; code
# pages are file-backed and shared), and its least-squares slope per million requests,
# which a leak makes steadily positive and noise leaves near zero.
awk '$1 >= 60 { n++; x = $2 / 1e6; y = $4; sx += x; sy += y; sxx += x * x; sxy += x * y
                if (n == 1 || y < lo) lo = y; if (n == 1 || y > hi) hi = y; if (n == 1) { x0 = x; f0 = $5 } x1 = x; f1 = $5 }
     END { if (n < 2) exit; slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
           printf "after the first minute (%d samples, %.2f million requests): anonymous MB %.1f to %.1f, slope %+.2f MB per million requests; file-backed MB %.1f → %.1f\n", n, x1 - x0, lo, hi, slope, f0, f1 }' "$WORK/samples"
awk 'END { print "smart-bff log lines (warning and above):", NR }' "$WORK/bff.log"
if [ -n "${HEAPTRACK:-}" ]; then
  kill -TERM "$BFF_PID"; wait "$WRAPPER_PID" || true
  heaptrack_print -f "$HEAPTRACK".zst -p 0 -a 0 -T 0 -l 0 -M "$WORK/massif" 2>/dev/null | grep -E "^(calls to allocation|peak heap|total memory leaked)" || true
  # The live heap minute by minute (a leak makes it climb; fragmentation and thread stacks,
  # which the resident figures above include, do not show here).
  grep -E "^(time|mem_heap_B)=" "$WORK/massif" | paste - - | awk -F'[=\t]' '{ m = int($2 / 60); last[m] = $4; if ($4 > peak[m]) peak[m] = $4; if (m > n) n = m }
    END { for (m = 0; m <= n; m++) if (m in last) printf "minute %d: live heap at its end %.2f MB, its peak %.2f MB\n", m, last[m] / 1048576, peak[m] / 1048576 }'
  echo "(what was never freed, by where it was allocated: heaptrack_print -f $HEAPTRACK.zst -l 1)"
fi
