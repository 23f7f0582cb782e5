-- The id of each audit write, stored in the write's own transaction. A writer whose COMMIT
-- got no answer (the connection broke: a failover, a network cut) cannot tell whether its
-- rows are in; it asks here before it writes them again, so that no PHI access is recorded
-- twice. The question claims the id (INSERT ... ON CONFLICT DO NOTHING): it waits for a
-- transaction still holding the id, and after it no late commit of the lost write can land.
-- Rows older than a week are swept.
CREATE TABLE audit_batches (
    id bytea PRIMARY KEY,
    stored_at timestamptz NOT NULL DEFAULT now()
);
