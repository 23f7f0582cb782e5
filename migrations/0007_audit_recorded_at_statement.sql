-- recorded_at is stamped with the time its COPY statement began (statement_timestamp()),
-- no longer as each row is written (clock_timestamp()). clock_timestamp() is volatile, and
-- PostgreSQL's COPY inserts rows one at a time into a table with a volatile default, where
-- it otherwise stores them in batches (heap_multi_insert: one WAL record and one buffer
-- lock per page's worth of rows). statement_timestamp() is stable: the batches come back.
-- Benchmarks/audit-rows.sh (BEFORE=0006) measures the PostgreSQL CPU per row saved.
--
-- The export's bound stays sound: a row is still stamped after its transaction began (the
-- export's clock takes the oldest open writer's start into account) and a committed row's
-- COPY still ended less than its 60 s statement_timeout after the stamp (see
-- AuditEventExport.settle). The rows of one COPY now share one instant; the export reads
-- an instant's rows by the primary key, as it does for the rows stored before 0004.
-- Changing a default rewrites nothing; the lock it needs is waited for 10 s at most.
SET LOCAL lock_timeout = '10s';
ALTER TABLE audit_events ALTER COLUMN recorded_at SET DEFAULT statement_timestamp();
