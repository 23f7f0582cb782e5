-- A session identifier that a sign-in replaced (the new session took its launches over),
-- remembered for as long as a sign-in's state lives (10 minutes; swept after). Another
-- sign-in that the same browser began before the replacement (two tabs' launches whose
-- callbacks overlap) still carries the old identifier: finding it here, that sign-in is
-- refused, rather than start a session without the browser's other launches, which the
-- new cookie would then hide. The old identifier gives access to nothing here.
CREATE TABLE retired_sessions (
    id_hash    text PRIMARY KEY,
    retired_at timestamptz NOT NULL
);
