#!/bin/bash
. /tmp/hD/env.sh
for NAME in none mm128 mm128r mm32 mmm128 mmm32; do
  DB=w_$NAME; dropdb -h /tmp/hD -p 43432 --if-exists $DB; createdb -h /tmp/hD -p 43432 -T tpl_$NAME $DB
  $PSQL -d $DB -At -c "CHECKPOINT" >/dev/null
  for ph in reuse append; do
    [ $ph = append ] && $PSQL -d $DB -q -c "CREATE TABLE ins (LIKE audit_events INCLUDING ALL)"
    S=$($PSQL -d $DB -At -c "SELECT pg_current_wal_insert_lsn()")
    $PSQL -d $DB -q -f /tmp/hD/$ph.sql
    E=$($PSQL -d $DB -At -c "SELECT pg_current_wal_insert_lsn()")
    TOT=$($PSQL -d $DB -At -c "SELECT pg_wal_lsn_diff('$E','$S')")
    BR=$(/usr/lib/postgresql/15/bin/pg_waldump -p /tmp/hD/pg/pg_wal -s $S -e $E -r BRIN --stats=record 2>/dev/null | grep -E '^BRIN/' | awk '{printf "%s n=%s bytes=%s; ", $1, $2, $6+$9}')
    echo "$NAME $ph wal_total=$TOT | $BR" >> /tmp/hD/out/wal.txt
  done
  dropdb -h /tmp/hD -p 43432 $DB
done
