-- smart-bff: no transaction
-- The BRIN index on recorded_at (0005) keeps a minimum and a maximum per block range, and
-- never narrows them: once retention has deleted old entries and VACUUM has made their pages
-- reusable, new entries land in them, and each such range then spans years. An export's
-- window then reads most of the table: on a million entries after one reuse, 10 925 heap
-- blocks and 138 ms for a 10-minute window, against 173 and 5 ms with this opclass, which
-- keeps up to 32 values per range as separate intervals (BENCHMARKS.md, "BRIN after
-- retention"). Ranges of 32 pages: 45 blocks for that window; still a few hundred kB.
-- Appends cost the same (the last range is not summarised until full).
--
-- Built CONCURRENTLY, as 0005's: the audit writers are not held back while a large trail is
-- read. Safe to run again from its start: a build stopped halfway is dropped and made anew,
-- and the old index goes only once the new one is in place.
DROP INDEX CONCURRENTLY IF EXISTS audit_events_recorded_at_multi;
CREATE INDEX CONCURRENTLY audit_events_recorded_at_multi ON audit_events
    USING brin (recorded_at timestamptz_minmax_multi_ops) WITH (pages_per_range = 32, autosummarize = on);
DROP INDEX CONCURRENTLY IF EXISTS audit_events_recorded_at;
