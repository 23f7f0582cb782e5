#!/bin/bash
# usage: insbench.sh NAME TRIAL -> reuse COPY (150 x 2000 into freed pages) and append COPY (100 x 2000 into an empty copy of the table)
. /tmp/hD/env.sh
NAME=$1; T=$2; DB=ib_${NAME}_$T
dropdb -h /tmp/hD -p 43432 --if-exists $DB; createdb -h /tmp/hD -p 43432 -T tpl_$NAME $DB
CPU="SELECT split_part(s, ' ', 14)::int + split_part(s, ' ', 15)::int AS ticks FROM (SELECT split_part(pg_read_file('/proc/self/stat'), ') ', 2) s) x"
# fields after "(comm) " : state is 1 -> utime is field 12, stime 13 of the remainder
CPU="SELECT (split_part(s, ' ', 12)::int + split_part(s, ' ', 13)::int) * 10 AS cpu_ms FROM (SELECT split_part(pg_read_file('/proc/self/stat'), ') ', 2) s) x"
run() { # $1 label, $2 file with COPY statements
  { echo "SET synchronous_commit = off;"; echo "$CPU;"; echo '\timing on'; cat $2; echo '\timing off'; echo "$CPU;"; } > /tmp/hD/out/ib_$DB_$1.sql
  $PSQL -d $DB -At -f /tmp/hD/out/ib_$DB_$1.sql > /tmp/hD/out/ib_$DB_$1.out
  W=$(grep '^Time:' /tmp/hD/out/ib_$DB_$1.out | awk '{s+=$2} END {printf "%.0f", s}')
  C=$(grep -E '^[0-9]+$' /tmp/hD/out/ib_$DB_$1.out | sed -n '1p;$p' | paste -sd' ' | awk '{print $2-$1}')
  echo "$NAME t$T $1 wall_ms $W cpu_ms $C" >> /tmp/hD/out/insbench.txt
}
run reuse /tmp/hD/reuse.sql
$PSQL -d $DB -q -c "CREATE TABLE ins (LIKE audit_events INCLUDING ALL)"
run append /tmp/hD/append.sql
[ "$T" = 1 ] && $PSQL -d $DB -At -c "SELECT '$NAME', pg_relation_size('audit_events_recorded_at'), (SELECT pg_relation_size(indexrelid) FROM pg_index WHERE indrelid = 'ins'::regclass AND indexrelid <> 'ins_pkey'::regclass)" >> /tmp/hD/out/ib_sizes.txt
dropdb -h /tmp/hD -p 43432 $DB
