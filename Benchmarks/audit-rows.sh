#!/usr/bin/env bash
# PostgreSQL CPU per audit row, as smart-bff writes them (2 000-row batches, a transaction
# each, times always increasing), for the audit table before and after a migration: the
# migrations up to BEFORE (default 0002) in one schema, all of them in another; rounds
# interleaved, medians. Text COPY here (smart-bff uses binary); the difference is the table's.
# Usage: Benchmarks/audit-rows.sh [rounds=6] [batches per round=50]   (BEFORE=0002)
source "$(dirname "$0")/lib.sh"
ROUNDS=${1:-6}; BATCHES=${2:-50}; BEFORE=${BEFORE:-0002}
start_postgres
P() { psql -q -X -v ON_ERROR_STOP=1 -h "$PG_SOCK" -U postgres -d postgres "$@"; }
for schema in before after; do
  P -c "CREATE SCHEMA $schema"
  for f in "$ROOT"/migrations/*.sql; do
    [ "$schema" = before ] && [[ "$(basename "$f")" > "$BEFORE~" ]] && continue
    { echo "SET search_path = $schema;"; cat "$f"; } | P >/dev/null
  done
done
python3 - "$WORK" "$ROUNDS" "$BATCHES" <<'PY'
import sys, hashlib, datetime
work, rounds, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = datetime.datetime(2026, 11, 25, 9, 0, 0); lh = hashlib.sha256(b"launch").hexdigest(); k = 0
for r in range(rounds):
    for schema in ("before", "after"):
        for b in range(batches):
            with open(f"{work}/{schema}-{r}-{b}.csv", "w") as f:
                for _ in range(2000):
                    k += 1
                    at = (t + datetime.timedelta(microseconds=37 * k)).isoformat() + "+00"
                    f.write(f"{at},{lh},https://ehr.example.org/fhir,pat-1,https://ehr.example.org/fhir/Patient/pat-1,pat-1,GET,/Patient/bench,200,1398,f\n")
PY
chmod 644 "$WORK"/*.csv
COLS="at, launch_hash, iss, sub, fhir_user, patient, method, path, upstream_status, bytes, text_escaped"
for r in $(seq 0 $((ROUNDS - 1))); do
  for schema in before after; do
    : > "$WORK/copy.sql"
    for b in $(seq 0 $((BATCHES - 1))); do
      echo "\\copy $schema.audit_events ($COLS) FROM '$WORK/$schema-$r-$b.csv' (FORMAT csv)" >> "$WORK/copy.sql"
    done
    P -c CHECKPOINT
    c0=$(pg_cpu_seconds); P -f "$WORK/copy.sql"; sleep 0.3; c1=$(pg_cpu_seconds)
    echo "$schema $(awk -v a="$c0" -v b="$c1" -v n=$((BATCHES * 2000)) 'BEGIN { printf "%.2f", (b - a) * 1e6 / n }')" >> "$WORK/res"
  done
done
for schema in before after; do
  echo "$schema (migrations $( [ $schema = before ] && echo "to $BEFORE" || echo all )): $(awk -v s=$schema '$1 == s { printf "%s ", $2 }' "$WORK/res")-> median $(awk -v s=$schema '$1 == s { print $2 }' "$WORK/res" | median) us of PostgreSQL CPU per row"
done
