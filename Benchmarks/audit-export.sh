#!/usr/bin/env bash
# `smart-bff audit export` throughput: ROWS synthetic audit entries (a third of them searches
# with a query) in a throwaway PostgreSQL, exported to /dev/null, alternating smart-bff and
# COMPARE_BINARY (if given) for ROUNDS rounds; AuditEvents per second (median) and the
# export's peak resident memory. The trail grows at up to 8 000 reads/s under load, so an
# export slower than that never catches up.
# Usage: Benchmarks/audit-export.sh [rows=200000] [rounds=3]
# COMPARE_BINARY=path: also export with that build (an A/B on the same rows).
source "$(dirname "$0")/lib.sh"
ROWS=${1:-200000}; ROUNDS=${2:-3}
build_release
start_postgres
cd "$ROOT"
"$BFF" migrate >/dev/null
psql "$DATABASE_URL" -q -c "INSERT INTO audit_events (at, launch_hash, iss, sub, fhir_user, patient, method, path, upstream_status, bytes, recorded_at)
  SELECT now() - interval '1 hour' + n * interval '1 millisecond', 'launch-' || (n % 50), 'https://ehr.example.org/fhir/r4', 'user-' || (n % 50),
         'https://ehr.example.org/fhir/r4/Practitioner/' || (n % 50), 'pat-' || (n % 500), 'GET',
         CASE WHEN n % 3 = 0 THEN '/Observation?patient=pat-' || (n % 500) || '&category=laboratory&_count=50' ELSE '/Patient/pat-' || (n % 500) END,
         200, 1398, now() - interval '1 hour' + n * interval '1 millisecond'
  FROM generate_series(1, $ROWS) n"
export_once() { # $1: binary → "events/s peakKB"
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$1" audit export > "$WORK/out.ndjson" 2>/dev/null
  read -r secs kb < "$WORK/time"
  lines=$(wc -l < "$WORK/out.ndjson")
  [ "$lines" = "$ROWS" ] || { echo "exported $lines of $ROWS" >&2; exit 1; }
  awk -v n="$lines" -v s="$secs" -v kb="$kb" 'BEGIN { printf "%.0f %d\n", n / s, kb }'
}
WHO="bff"; [ -z "${COMPARE_BINARY:-}" ] || WHO="bff alt"
for who in $WHO; do : > "$WORK/$who"; done
for r in $(seq 1 "$ROUNDS"); do
  export_once "$BFF" >> "$WORK/bff"
  [ -z "${COMPARE_BINARY:-}" ] || export_once "$COMPARE_BINARY" >> "$WORK/alt"
done
for who in $WHO; do
  echo "$who rows=$ROWS events/s (median of $ROUNDS) = $(cut -d' ' -f1 "$WORK/$who" | median)  peak RSS MB = $(awk '{ if ($2 > m) m = $2 } END { printf "%.0f", m / 1024 }' "$WORK/$who")  [$(cut -d' ' -f1 "$WORK/$who" | tr '\n' ' ')]"
done
[ -z "${COMPARE_BINARY:-}" ] || awk -v b="$(cut -d' ' -f1 "$WORK/bff" | median)" -v a="$(cut -d' ' -f1 "$WORK/alt" | median)" 'BEGIN { printf "ratio smart-bff/alt = %.2f\n", b / a }'
