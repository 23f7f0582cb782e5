-- An audit entry whose text the server refused (NUL, a character the database encoding
-- lacks) is stored with its text fields percent-escaped. This column says which entries
-- are: an escape is otherwise indistinguishable from the same characters in the original.
-- A constant default: no table rewrite (PostgreSQL 11+).
ALTER TABLE audit_events ADD COLUMN text_escaped boolean NOT NULL DEFAULT false;
