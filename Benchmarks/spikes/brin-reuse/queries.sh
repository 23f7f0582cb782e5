#!/bin/bash
# usage: queries.sh DB LABEL  -> appends to /tmp/hD/out/queries.txt, full plans to out/plan_DB_LABEL_W.txt
. /tmp/hD/env.sh
DB=$1; LABEL=$2
COLS="id, extract(epoch from at), launch_hash, iss, sub, fhir_user, patient, method, path, upstream_status, bytes, text_escaped, (extract(epoch from at) * 1000000)::bigint, (extract(epoch from recorded_at) * 1000000)::bigint, broken_off"
for W in "old|2024-01-16 01:00:00+00|2024-01-16 01:10:00+00" "mid|2024-02-04 12:00:00+00|2024-02-04 12:10:00+00" "new|2024-02-08 21:36:00+00|2024-02-08 21:46:00+00"; do
  IFS='|' read -r WN FROM TO <<<"$W"
  Q="EXPLAIN (ANALYZE, BUFFERS) SELECT $COLS FROM audit_events WHERE recorded_at >= '$FROM'::timestamptz AND recorded_at < '$TO'::timestamptz ORDER BY recorded_at, at, id LIMIT 5000;"
  F=/tmp/hD/out/plan_${DB}_${LABEL}_$WN.txt; : > $F
  for i in 1 2 3 4 5 6; do $PSQL -d $DB -c "$Q" > $F.$i; done
  cp $F.6 $F; 
  MED=$(for i in 2 3 4 5 6; do grep 'Execution Time' $F.$i | awk '{print $3}'; done | sort -n | sed -n 3p)
  rm -f $F.[1-6]
  SCAN=$(grep -oE '(Bitmap Heap Scan|Seq Scan|Index Scan)' $F | head -1)
  HB=$(grep -o 'Heap Blocks:.*' $F | head -1)
  RR=$(grep -o 'Rows Removed by [A-Za-z ]*: [0-9]*' $F | head -1)
  ROWS=$(grep -oE 'Limit .*actual time=[^ ]* rows=[0-9]+' $F | grep -oE 'rows=[0-9]+$')
  BUF=$(grep -o 'Buffers: .*' $F | head -1)
  echo "$DB $LABEL $WN | $SCAN | $HB | $RR | $ROWS | median ${MED} ms | $BUF" >> /tmp/hD/out/queries.txt
done
