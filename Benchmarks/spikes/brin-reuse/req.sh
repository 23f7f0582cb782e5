#!/bin/bash
. /tmp/hD/env.sh
for v in none mm128 mm128r mm32 mmm128 mmm32; do
  dropdb -h /tmp/hD -p 43432 --if-exists q_$v; createdb -h /tmp/hD -p 43432 -T tpl_$v q_$v
  $PSQL -d q_$v -q -f /tmp/hD/reuse.sql; PPR=128; case $v in *32) PPR=32;; esac
  $PSQL -d q_$v -Atc "SELECT autosum($PPR)" >/dev/null; $PSQL -d q_$v -qc "VACUUM ANALYZE audit_events"
done
for v in none mm128 mm128r mm32 mmm128 mmm32; do /tmp/hD/queries.sh q_$v stale2; done
