-- smart-bff: no transaction
-- Rows arrive in recorded order, so a BRIN index (a summary per 128 pages) finds the rows of
-- a time range at next to no cost per insert; the trail avoids B-tree indexes, each of which
-- costs about a fifth of PostgreSQL's CPU per row (see 0003). `autosummarize` summarises each
-- block range once it is full, so that an export does not read the unsummarised ranges
-- written since the last VACUUM.
--
-- Built CONCURRENTLY, outside a transaction: on a large trail the build reads the whole table,
-- and a plain CREATE INDEX would hold every audit write back meanwhile, until the writers'
-- backlog made /fhir refuse reads (fail closed). A build stopped halfway leaves an invalid
-- index, which the next start drops and builds again.
DROP INDEX CONCURRENTLY IF EXISTS audit_events_recorded_at;
CREATE INDEX CONCURRENTLY audit_events_recorded_at ON audit_events USING brin (recorded_at) WITH (autosummarize = on);
-- Statistics for the new column now, not at the next autoanalyze: every row stored before
-- 0004 has the same recorded_at, and an export pages through that one value by the primary
-- key only if the planner knows how common it is.
ANALYZE audit_events;
