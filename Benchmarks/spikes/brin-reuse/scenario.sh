#!/bin/bash
# usage: scenario.sh NAME PPR RESUM TRIAL QUERIES 'INDEX DDL or empty'
. /tmp/hD/env.sh
NAME=$1; PPR=$2; RESUM=$3; TRIAL=$4; QUERIES=$5; DDL=$6
DB=${NAME}_t$TRIAL
P="$PSQL -d $DB -At"
dropdb -h /tmp/hD -p 43432 --if-exists $DB; createdb -h /tmp/hD -p 43432 $DB
/tmp/hD/migrate.sh $DB >/dev/null 2>&1
$PSQL -q -d $DB -f /tmp/hD/helpers.sql
$P -c "DROP INDEX audit_events_recorded_at"
[ -n "$DDL" ] && $P -c "$DDL"
# phase 1: 1 M rows in recorded order, 100 rows per recorded_at instant, 30 days
for k in $(seq 0 9); do $P -c "INSERT INTO audit_events (at, launch_hash, iss, sub, fhir_user, patient, method, path, upstream_status, bytes, text_escaped, recorded_at, broken_off) SELECT * FROM gen($((k*100000)), $((k*100000+99999)))" >/dev/null; done
$P -c "SELECT autosum($PPR)" >/dev/null
# phase 2: retention, oldest 15 days (at < T0 + 15 d), deleteAudit's statement, 10 000-row chunks
CUT=$($P -c "SELECT extract(epoch from timestamptz '$T0' + interval '15 days')")
while :; do
  n=$($P -c "BEGIN; SET LOCAL lock_timeout = '10s'; SET LOCAL statement_timeout = '300s'; WITH a AS (DELETE FROM audit_events WHERE ctid = ANY(ARRAY(SELECT ctid FROM audit_events WHERE at < to_timestamp($CUT) ORDER BY at, id LIMIT 10000)) RETURNING 1) SELECT count(*) FROM a; COMMIT;" | grep -E '^[0-9]+$')
  [ "$n" -lt 10000 ] && break
done
# phase 3
$P -c "VACUUM audit_events"
if [ "$RESUM" = 1 ]; then
  S=$(date +%s%N); $P -c "SELECT desum($PPR)" >/dev/null; $P -c "SELECT autosum($PPR)" >/dev/null; E=$(date +%s%N)
  echo "$NAME t$TRIAL resummarize_ms $(( (E-S)/1000000 ))" >> /tmp/hD/out/inserts.txt
fi
# phase 4: 300 k newer rows as 150 binary COPYs of 2 000 rows (20 instants of 100 rows each), timed
{ echo "SET synchronous_commit = off;"; echo '\timing on'; for j in $(seq 0 149); do echo "COPY audit_events (at, launch_hash, iss, sub, fhir_user, patient, method, path, upstream_status, bytes, text_escaped, recorded_at, broken_off) FROM '/tmp/hD/b/$j.bin' (FORMAT binary);"; done; } > /tmp/hD/out/p4_$DB.sql
T=$($PSQL -d $DB -f /tmp/hD/out/p4_$DB.sql | grep '^Time:' | awk '{s+=$2} END {printf "%.0f", s}')
echo "$NAME t$TRIAL reuse_copy_300k_ms $T" >> /tmp/hD/out/inserts.txt
$P -c "SELECT autosum($PPR)" >/dev/null
$P -c "ANALYZE audit_events"
if [ "$QUERIES" = 1 ]; then
  $P -F' ' -c "SELECT 'placement', count(*) FILTER (WHERE recorded_at >= timestamptz '$T0' + interval '30 days') AS new_rows,
     min((ctid::text::point)[0]) FILTER (WHERE recorded_at >= timestamptz '$T0' + interval '30 days') AS new_minblk,
     max((ctid::text::point)[0]) FILTER (WHERE recorded_at >= timestamptz '$T0' + interval '30 days') AS new_maxblk,
     min((ctid::text::point)[0]) FILTER (WHERE recorded_at < timestamptz '$T0' + interval '30 days') AS old_minblk,
     max((ctid::text::point)[0]) FILTER (WHERE recorded_at < timestamptz '$T0' + interval '30 days') AS old_maxblk,
     pg_relation_size('audit_events')/8192 AS nblocks, count(*) AS total FROM audit_events" >> /tmp/hD/out/placement_$DB.txt
  $P -F' ' -c "SELECT 'mixed128ranges', count(*) FROM (SELECT ((ctid::text::point)[0]::int / 128) r FROM audit_events GROUP BY 1 HAVING min(recorded_at) < timestamptz '$T0' + interval '30 days' AND max(recorded_at) >= timestamptz '$T0' + interval '30 days') s" >> /tmp/hD/out/placement_$DB.txt
  $P -c "SELECT md5(string_agg(ctid::text || recorded_at::text, ',' ORDER BY ctid)) FROM audit_events" >> /tmp/hD/out/placement_$DB.txt
  /tmp/hD/queries.sh $DB stale
  $P -c "SELECT '$NAME stale idx_size', pg_size_pretty(pg_relation_size('audit_events_recorded_at'))" >> /tmp/hD/out/sizes.txt 2>/dev/null
  if [ -n "$DDL" ]; then
    $P -c "DROP INDEX audit_events_recorded_at"
    S=$(date +%s%N); $P -c "$DDL"; E=$(date +%s%N)
    $P -c "ANALYZE audit_events"
    echo "$NAME build_ms $(( (E-S)/1000000 ))" >> /tmp/hD/out/inserts.txt
    $P -c "SELECT '$NAME fresh idx_size', pg_size_pretty(pg_relation_size('audit_events_recorded_at'))" >> /tmp/hD/out/sizes.txt
    /tmp/hD/queries.sh $DB fresh
  fi
fi
