-- The session each browser sign-in started or joined, keyed by the SHA-256 of the sign-in's
-- browser binding (what its login cookie holds, a MAC of its `state`; never in a URL),
-- remembered as long as a `state` lives (10 minutes; swept after). Two tabs of one browser
-- whose callbacks overlap carry each other's login cookies: each sign-in records its session
-- under its own binding and the others' it saw, and one that finds a session recorded under
-- any of them takes it over, so that whichever cookie the browser keeps holds both, and no
-- session is left unreachable with live tokens.
CREATE TABLE sign_in_sessions (
    binding_hash text PRIMARY KEY,
    session_hash text NOT NULL,
    created_at   timestamptz NOT NULL
);
CREATE INDEX sign_in_sessions_created_at ON sign_in_sessions (created_at);

-- The session that took a retired one's launches over: a sign-in from a browser that still
-- carries the retired identifier (its callback began before the other's answer arrived)
-- joins that session rather than start one that would hide it.
ALTER TABLE retired_sessions ADD COLUMN successor_hash text;
