-- A read whose response did not reach the browser whole: the EHR's body broke off or
-- stalled, the browser left, or the BFF refused what the EHR sent (a redirect outside its
-- base, a content coding not asked for). The entry's status is the EHR's, its bytes what was
-- passed on; without this column an export called such a read a success.
-- A constant default: no table rewrite (PostgreSQL 11+), and entries written by an
-- instance of the previous release during a rolling upgrade read as whole.
-- The ALTER takes the table's strongest lock, briefly; waiting for it behind a long reader
-- would hold every audit write (and so, after 30 s, every PHI read) back: it waits at most
-- 10 s, and a failed attempt is made again at the next start.
SET LOCAL lock_timeout = '10s';
ALTER TABLE audit_events ADD COLUMN broken_off boolean NOT NULL DEFAULT false;
