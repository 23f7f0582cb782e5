-- The two statements PostgresSessionStore runs for a session lookup, as pgbench runs them,
-- so the store's throughput can be compared with PostgreSQL's own for the same work.
--
-- Exact SQL in the store (Sources/PostgresStore/PostgresSessionStore.swift), prepared once
-- per connection, parameters in text format:
--   findSession:  SELECT id_hash, extract(epoch from created_at), extract(epoch from last_seen_at), extract(epoch from expires_at)
--                 FROM sessions WHERE id_hash = $1 AND expires_at > to_timestamp($2)
--   touchSession: UPDATE sessions SET last_seen_at = to_timestamp($1), expires_at = to_timestamp($2)
--                 WHERE id_hash = $3 AND expires_at > to_timestamp($4)
--                   AND last_seen_at <= to_timestamp($5)
--   ($1 of findSession and $3 of touchSession: hex SHA-256 of the session id; the timestamps are
--   seconds since 1970 computed by the caller; the touch runs at most once per 60 s per session,
--   so it is skipped on most lookups. The FHIR proxy's hot path uses proxyContext instead,
--   which joins launches and tokens to the same session lookup.)
--
-- Here the caller's values become server-side expressions: the hash of the n-th test session
-- is encode(sha256(n::text::bytea), 'hex') and "now" is now(). The touch is written the way
-- the store issues it when it is due; with last_seen_at just written it then updates nothing
-- until 60 s have passed, like the store.
--
-- Setup (1,000 live sessions, as Benchmarks/store-sessions.sh does):
--   INSERT INTO sessions (id_hash, last_seen_at, expires_at)
--   SELECT encode(sha256(n::text::bytea), 'hex'), now(), now() + interval '1 day' FROM generate_series(1, 1000) n;
-- Run:
--   pgbench -n -M prepared -c 8 -j 2 -T 10 -f Benchmarks/pgbench-session-lookup.sql DBNAME
\set n random(1, 1000)
SELECT id_hash, extract(epoch from created_at), extract(epoch from last_seen_at), extract(epoch from expires_at)
  FROM sessions WHERE id_hash = encode(sha256(:n::text::bytea), 'hex') AND expires_at > now();
UPDATE sessions SET last_seen_at = now(), expires_at = now() + interval '8 hours'
  WHERE id_hash = encode(sha256(:n::text::bytea), 'hex') AND expires_at > now()
    AND last_seen_at <= now() - interval '60 seconds';
