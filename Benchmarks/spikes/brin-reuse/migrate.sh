#!/bin/bash
# usage: migrate.sh DB
. /tmp/hD/env.sh
for f in /work/main/migrations/*.sql; do
  if head -1 "$f" | grep -q 'smart-bff: no transaction'; then $PSQL -q -d "$1" -f "$f"; else $PSQL -q -1 -d "$1" -f "$f"; fi
done
$PSQL -q -d "$1" -f /tmp/hD/gen.sql
