-- When each audit row was written, for `smart-bff audit export --since`. `at` is when the
-- EHR's response head arrived; the row is committed later: after the body streamed, and
-- after any retries while the database was away (minutes, maybe). An export that selects
-- by `at` never delivers a row committed after the previous run with an `at` before it.
-- The export selects by `recorded_at` instead, up to a bound that every row stamped before
-- it has had time to commit by (see AuditEventExport.settle).
--
-- Added with a non-volatile default (`now()`, this migration's start, one value for every
-- row): no table rewrite (PostgreSQL 11+). Existing rows get the migration's time, an upper
-- bound of when they were written (give or take a write the ALTER waited for), and every
-- one of them is committed once the column exists: safe for a watermark. An export whose
-- --since is earlier delivers them all (again); none is missed.
-- The ALTER needs the table to itself for a moment: it waits at most 10 s for the lock (and
-- holds every audit write back while it waits); past that this start fails and the next
-- one tries again. The index comes in 0005, built without holding writes back.
SET LOCAL lock_timeout = '10s';
ALTER TABLE audit_events ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT now();
-- New rows: the time the COPY writes the row (per row, not the transaction's start, which
-- would be up to the COPY's length earlier than its commit). Changing a default rewrites
-- nothing.
ALTER TABLE audit_events ALTER COLUMN recorded_at SET DEFAULT clock_timestamp();
