#!/bin/bash
# usage: cycles.sh NAME PPR 'DDL' -> repeated retention/reuse cycles on a 100 k-row trail; 20 k rows per cycle
. /tmp/hD/env.sh
NAME=$1; PPR=$2; DDL=$3; DB=cy_$NAME; P="$PSQL -d $DB -At"
dropdb -h /tmp/hD -p 43432 --if-exists $DB; createdb -h /tmp/hD -p 43432 $DB
/tmp/hD/migrate.sh $DB >/dev/null 2>&1; $PSQL -q -d $DB -f /tmp/hD/helpers.sql
$P -c "DROP INDEX audit_events_recorded_at"; $P -c "$DDL"
C="at, launch_hash, iss, sub, fhir_user, patient, method, path, upstream_status, bytes, text_escaped, recorded_at, broken_off"
$P -c "INSERT INTO audit_events ($C) SELECT * FROM gen(0, 99999)" >/dev/null; $P -c "SELECT autosum($PPR)" >/dev/null
for c in $(seq 1 100); do
  lo=$((c*20000)); CUT="timestamptz '$T0' + ($lo/100) * interval '259.2 s'"
  while :; do n=$($P -c "WITH a AS (DELETE FROM audit_events WHERE ctid = ANY(ARRAY(SELECT ctid FROM audit_events WHERE at < $CUT ORDER BY at, id LIMIT 10000)) RETURNING 1) SELECT count(*) FROM a"); [ "$n" -lt 10000 ] && break; done
  $P -c "VACUUM audit_events" >/dev/null
  for j in $(seq 0 9); do s=$((100000+(c-1)*20000+j*2000)); $P -c "INSERT INTO audit_events ($C) SELECT * FROM gen($s, $((s+1999)))" >/dev/null; done
  $P -c "SELECT autosum($PPR)" >/dev/null
  if [ $((c % 10)) = 0 ]; then
    for W in old mid; do
      [ $W = old ] && F="$CUT + interval '1 hour'" || F="$CUT + interval '36 hours'"
      H=$($PSQL -d $DB -c "SET enable_seqscan = off; EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM audit_events WHERE recorded_at >= $F AND recorded_at < $F + interval '10 minutes' ORDER BY recorded_at, at, id LIMIT 5000" | grep -oE '(Heap Blocks: [a-z=0-9 ]*|Recheck: [0-9]+|Seq Scan|Limit .*rows=[0-9]+ loops)' | sed 's/Limit.*actual[^ ]* //' | paste -sd' ')
      echo "$NAME cycle $c $W $H" >> /tmp/hD/out/cycles.txt
    done
    echo "$NAME cycle $c nblocks $($P -c "SELECT pg_relation_size('audit_events')/8192, pg_relation_size('audit_events_recorded_at')")" >> /tmp/hD/out/cycles.txt
  fi
done
dropdb -h /tmp/hD -p 43432 $DB
