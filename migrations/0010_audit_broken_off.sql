-- A read whose response did not reach the browser whole: the EHR's body broke off or
-- stalled, the browser left, or the BFF refused what the EHR sent (a redirect outside its
-- base, a content coding not asked for). The entry's status is the EHR's, its bytes what was
-- passed on; without this column an export called such a read a success.
-- A constant default: no table rewrite (PostgreSQL 11+), and entries written by an
-- instance of the previous release during a rolling upgrade read as whole.
ALTER TABLE audit_events ADD COLUMN broken_off boolean NOT NULL DEFAULT false;
