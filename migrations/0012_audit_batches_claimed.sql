-- Tells a settle's claim of a batch id apart from the write that stored the batch. A writer
-- whose COMMIT got no answer settles the batch by claiming its id; when that claim's own
-- answer is lost too, the settle is asked again, and found the claim: without this column it
-- took its own claim for the write, called the batch stored, and its entries were dropped.
-- Rows written before this column read as writes, as they were. A tiny table, but its lock
-- waits behind audit writes: at most 10 s, and a failed attempt is made again at the next start.
SET LOCAL lock_timeout = '10s';
ALTER TABLE audit_batches ADD COLUMN claimed boolean NOT NULL DEFAULT false;
