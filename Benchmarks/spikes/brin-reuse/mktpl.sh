#!/bin/bash
# usage: mktpl.sh NAME PPR RESUM 'DDL'  -> database tpl_NAME in the post-retention, post-VACUUM state
. /tmp/hD/env.sh
NAME=$1; PPR=$2; RESUM=$3; DDL=$4; DB=tpl_$NAME; P="$PSQL -d $DB -At"
dropdb -h /tmp/hD -p 43432 --if-exists $DB; createdb -h /tmp/hD -p 43432 $DB
/tmp/hD/migrate.sh $DB >/dev/null 2>&1
$PSQL -q -d $DB -f /tmp/hD/helpers.sql
$P -c "DROP INDEX audit_events_recorded_at"
[ -n "$DDL" ] && $P -c "$DDL"
for k in $(seq 0 9); do $P -c "INSERT INTO audit_events (at, launch_hash, iss, sub, fhir_user, patient, method, path, upstream_status, bytes, text_escaped, recorded_at, broken_off) SELECT * FROM gen($((k*100000)), $((k*100000+99999)))" >/dev/null; done
$P -c "SELECT autosum($PPR)" >/dev/null
CUT=$($P -c "SELECT extract(epoch from timestamptz '$T0' + interval '15 days')")
while :; do
  n=$($P -c "BEGIN; SET LOCAL lock_timeout = '10s'; SET LOCAL statement_timeout = '300s'; WITH a AS (DELETE FROM audit_events WHERE ctid = ANY(ARRAY(SELECT ctid FROM audit_events WHERE at < to_timestamp($CUT) ORDER BY at, id LIMIT 10000)) RETURNING 1) SELECT count(*) FROM a; COMMIT;" | grep -E '^[0-9]+$')
  [ "$n" -lt 10000 ] && break
done
$P -c "VACUUM audit_events" >/dev/null
[ "$RESUM" = 1 ] && { $P -c "SELECT desum($PPR)" >/dev/null; $P -c "SELECT autosum($PPR)" >/dev/null; }
echo "$NAME $($P -c "SELECT count(*), pg_relation_size('audit_events')/8192 FROM audit_events")" >> /tmp/hD/out/tpl.txt
