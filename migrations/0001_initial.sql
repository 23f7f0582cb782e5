-- smart-bff schema, version 1. Append-only: never edit a migration once it has shipped.
-- Identifiers (session ids, launch ids, state, hand-off codes) are stored only as the hex
-- SHA-256 of their value; tokens and PKCE verifiers only as AES-256-GCM ciphertext.

CREATE TABLE pending_authorizations (
    state_hash        text PRIMARY KEY,
    iss               text NOT NULL,
    code_verifier     bytea NOT NULL,
    nonce             text,
    launch            text,
    return_to         text NOT NULL,
    handoff_challenge text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    expires_at        timestamptz NOT NULL
);
CREATE INDEX pending_authorizations_expires_at ON pending_authorizations (expires_at);

CREATE TABLE sessions (
    id_hash      text PRIMARY KEY,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX sessions_expires_at ON sessions (expires_at);

CREATE TABLE launches (
    id_hash      text PRIMARY KEY,
    session_hash text NOT NULL REFERENCES sessions (id_hash) ON DELETE CASCADE ON UPDATE CASCADE,
    iss          text NOT NULL,
    sub          text NOT NULL,
    fhir_user    text,
    scope        text NOT NULL,
    patient      text,
    context      jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX launches_session_recent ON launches (session_hash, created_at DESC);

CREATE TABLE tokens (
    launch_hash       text PRIMARY KEY REFERENCES launches (id_hash) ON DELETE CASCADE,
    access_token      bytea NOT NULL,
    refresh_token     bytea,
    id_token          bytea,
    response          bytea NOT NULL,
    access_expires_at timestamptz,
    version           integer NOT NULL DEFAULT 1,
    updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE handoff_codes (
    code_hash    text PRIMARY KEY,
    session_hash text NOT NULL REFERENCES sessions (id_hash) ON DELETE CASCADE ON UPDATE CASCADE,
    challenge    text NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX handoff_codes_expires_at ON handoff_codes (expires_at);

CREATE TABLE audit_events (
    id              bigserial PRIMARY KEY,
    at              timestamptz NOT NULL,
    launch_hash     text NOT NULL,
    iss             text NOT NULL,
    sub             text NOT NULL,
    fhir_user       text,
    patient         text,
    method          text NOT NULL,
    path            text NOT NULL,
    upstream_status integer NOT NULL,
    bytes           bigint NOT NULL
);
CREATE INDEX audit_events_at ON audit_events (at);
