-- The session each browser sign-in started, keyed by the SHA-256 of its `state`, remembered
-- as long as a `state` lives (10 minutes; swept after). Two tabs of one browser whose
-- callbacks overlap each carry the other's login cookie (named after its `state`): the
-- sign-in that stores its session second finds the first's here and takes its launches
-- over, so that whichever cookie the browser keeps holds both, and no session is left
-- unreachable with live tokens.
CREATE TABLE sign_in_sessions (
    state_hash   text PRIMARY KEY,
    session_hash text NOT NULL,
    created_at   timestamptz NOT NULL
);
CREATE INDEX sign_in_sessions_created_at ON sign_in_sessions (created_at);
