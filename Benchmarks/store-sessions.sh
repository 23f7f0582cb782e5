#!/usr/bin/env bash
# Session lookups (find by hash + touch) through PostgresSessionStore vs pgbench running the
# same two statements, same cluster, same number of connections, alternating rounds.
# Usage: Benchmarks/store-sessions.sh [clients=8] [seconds=10] [rounds=3]
source "$(dirname "$0")/lib.sh"
CLIENTS=${1:-8}; SECS=${2:-10}; ROUNDS=${3:-3}
(cd "$ROOT" && BFF_BENCHMARKS=1 swift build -c release --scratch-path "${BENCH_SCRATCH:-.build}" --product BFFBench >&2)
BENCH="$ROOT/${BENCH_SCRATCH:-.build}/release/BFFBench"
build_release
start_postgres
cd "$ROOT"
"$BFF" migrate >/dev/null
psql "$DATABASE_URL" -q -c "DELETE FROM sessions" -c "INSERT INTO sessions (id_hash, last_seen_at, expires_at)
  SELECT encode(sha256(n::text::bytea), 'hex'), now(), now() + interval '1 day' FROM generate_series(1, 1000) n"
cat > "$WORK/session.sql" <<'SQL'
\set n random(1, 1000)
SELECT id_hash, extract(epoch from created_at), extract(epoch from last_seen_at), extract(epoch from expires_at) FROM sessions WHERE id_hash = encode(sha256(:n::text::bytea), 'hex') AND expires_at > now();
UPDATE sessions SET last_seen_at = now(), expires_at = now() + interval '1 hour' WHERE id_hash = encode(sha256(:n::text::bytea), 'hex');
SQL
: > "$WORK/store"; : > "$WORK/pgbench"
for r in $(seq 1 "$ROUNDS"); do
  "$BENCH" sessions --clients "$CLIENTS" --seconds "$SECS" | awk '{print $2}' >> "$WORK/store"
  as_postgres pgbench -n -M prepared -c "$CLIENTS" -j 2 -T "$SECS" -f "$WORK/session.sql" -h "$PG_SOCK" -p 5432 -U postgres postgres 2>/dev/null \
    | awk '/^tps/ {print int($3)}' >> "$WORK/pgbench"
done
store=$(median < "$WORK/store"); pg=$(median < "$WORK/pgbench")
echo "store   clients=$CLIENTS lookups/s (median of $ROUNDS) = $store   [$(tr '\n' ' ' < "$WORK/store")]"
echo "pgbench clients=$CLIENTS tps       (median of $ROUNDS) = $pg   [$(tr '\n' ' ' < "$WORK/pgbench")]"
awk -v a="$store" -v b="$pg" 'BEGIN { printf "ratio store/pgbench = %.2f\n", a/b }'
