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
ALTER TABLE audit_events ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT now();
-- New rows: the time the COPY writes the row (per row, not the transaction's start, which
-- would be up to the COPY's length earlier than its commit). Changing a default rewrites
-- nothing.
ALTER TABLE audit_events ALTER COLUMN recorded_at SET DEFAULT clock_timestamp();
-- Rows arrive in recorded order, so a BRIN index (a summary per 128 pages) finds the rows of
-- a time range at next to no cost per insert; the trail avoids B-tree indexes, each of which
-- costs about a fifth of PostgreSQL's CPU per row (see 0003). `autosummarize` summarises each
-- block range once it is full, so that an export does not read the unsummarised ranges
-- written since the last VACUUM. On a large existing trail this reads the table once, under
-- the lock the ALTER took: audit writes are held back meanwhile (buffered and retried).
CREATE INDEX audit_events_recorded_at ON audit_events USING brin (recorded_at) WITH (autosummarize = on);
-- Statistics for the new column now, not at the next autoanalyze: every existing row has
-- the same recorded_at, and an export pages through that one value by the primary key
-- only if the planner knows how common it is.
ANALYZE audit_events;
