import Cryptography
import Foundation
import Logging
import Sessions

/// The `SessionStore` on PostgreSQL. Raw identifiers are hashed before any query; tokens
/// and PKCE verifiers are sealed with AES-256-GCM bound to their table, column and row.
public final class PostgresSessionStore: SessionStore {
    public let pool: ConnectionPool
    let cipher: TokenCipher
    /// A session's `last_seen_at` is written at most this often (a commit per read would
    /// cap the database near 10k requests/s).
    public let touchInterval: TimeInterval
    let logger: Logger
    /// Paces the warning about secrets that no key opens.
    let unopenedSecrets = WarningPace(interval: 60)

    /// `fallbackKeys` open what earlier token keys sealed (during a key rotation); only
    /// `tokenKey` seals. A secret that no key opens counts as absent: its request is
    /// answered as a session that ended (the user signs in again), with a warning on
    /// `logger`; the row stays, for an instance with the right key.
    public init(pool: ConnectionPool, tokenKey: AESGCMKey, fallbackKeys: [AESGCMKey] = [], touchInterval: TimeInterval = 60,
                logger: Logger = Logger(label: "smart-bff.store")) {
        self.pool = pool
        self.cipher = TokenCipher(key: tokenKey, fallbacks: fallbackKeys)
        self.logger = logger
        self.touchInterval = touchInterval
    }

    // MARK: Pending authorizations

    public func savePending(state: String, _ p: PendingAuthorization) async throws {
        let hash = Identifier.hash(state)
        let verifier = try cipher.seal(p.codeVerifier, table: "pending_authorizations", column: "code_verifier", row: hash)
        try await pool.query("""
            INSERT INTO pending_authorizations (state_hash, iss, code_verifier, nonce, launch, return_to, handoff_challenge, expires_at)
            VALUES (\(hash), \(p.iss), \(verifier), \(p.nonce), \(p.launch), \(p.returnTo), \(p.handoffChallenge), to_timestamp(\(p.expiresAt)))
            """)
    }

    public func consumePending(state: String, now: Date) async throws -> PendingAuthorization? {
        let hash = Identifier.hash(state)
        // One DELETE … RETURNING: of two concurrent consumers exactly one gets the row.
        let rows = try await pool.query("""
            DELETE FROM pending_authorizations WHERE state_hash = \(hash)
            RETURNING iss, code_verifier, nonce, launch, return_to, handoff_challenge, extract(epoch from expires_at)
            """)
        guard let row = rows.first else { return nil }
        let expiresAt = try row.date(6)
        guard expiresAt > now else { return nil }
        guard let verifier = open(try row.bytes(1), table: "pending_authorizations", column: "code_verifier", row: hash) else { return nil }
        return PendingAuthorization(iss: try row.string(0), codeVerifier: verifier, nonce: row[2], launch: row[3],
                                    returnTo: try row.string(4), handoffChallenge: row[5], expiresAt: expiresAt)
    }

    // MARK: Sessions

    public func createSession(ttl: TimeInterval, now: Date) async throws -> String {
        let id = Identifier.make()
        try await pool.withConnection { c in try await self.insertSession(hash: Identifier.hash(id), ttl: ttl, now: now, on: c) }
        return id
    }

    public func startSession(with launch: LaunchRecord, tokens: TokenSet, replacing previousSessionID: String?,
                             signIn: BrowserSignIn?, ttl: TimeInterval,
                             now: Date) async throws -> (sessionID: String, ended: [(LaunchRecord, TokenSet)]) {
        let id = Identifier.make(), hash = Identifier.hash(id)
        let sealed = try sealTokens(tokens, launchHash: launch.idHash)
        let bindings = signIn.map { ([$0.binding] + $0.otherBindings).map(Identifier.hash) } ?? []
        // Two overlapping sign-ins may lock the same sessions in different orders (one reached
        // through its successor, the cookie's last): PostgreSQL then aborts one (40P01), which
        // goes again once, the other done by then.
        do {
            return try await startSessionOnce(id: id, hash: hash, launch: launch, tokens: tokens, sealed: sealed, previousSessionID: previousSessionID,
                                              bindings: bindings, ttl: ttl, now: now)
        } catch let error as PostgresError where error.sqlState == "40P01" {
            return try await startSessionOnce(id: id, hash: hash, launch: launch, tokens: tokens, sealed: sealed, previousSessionID: previousSessionID,
                                              bindings: bindings, ttl: ttl, now: now)
        }
    }

    private func startSessionOnce(id: String, hash: String, launch: LaunchRecord, tokens: TokenSet, sealed: SealedTokens, previousSessionID: String?,
                                  bindings: [String], ttl: TimeInterval, now: Date) async throws -> (sessionID: String, ended: [(LaunchRecord, TokenSet)]) {
        try await pool.withTransaction(limits: PostgresSessionStore.signInLimits) { c in
            let linked = try await self.linkedSessions(bindings, now: now, on: c)
            try await self.insertSession(hash: hash, ttl: ttl, now: now, on: c)
            var ended: [(LaunchRecord, TokenSet)] = []
            for session in linked {
                ended += try await self.takeOver(session, into: hash, sameUserAs: launch, fromLiveCookie: false, now: now, on: c)
            }
            if let previous = previousSessionID.map(Identifier.hash) {
                ended += try await self.takeOver(previous, into: hash, sameUserAs: launch, fromLiveCookie: true, now: now, on: c)
            }
            try await self.insertLaunch(launch, tokens: tokens, sealed: sealed, sessionHash: hash, on: c)
            try await self.link(bindings, to: hash, now: now, on: c)
            return (id, ended)
        }
    }

    /// Every statement's limits on the BFF's connections (`ConnectionPool.Configuration.settings`),
    /// in place of the server's, unless a transaction sets its own: a request waits at most
    /// 5 s for a lock (a DBA's `LOCK TABLE`, a migration's `ALTER TABLE`) and runs at most
    /// 10 s, then fails as the database being unavailable (503), instead of holding its
    /// pooled connection, and its browser, for as long as the lock is held.
    public static let connectionSettings = "SET lock_timeout = '5s'; SET statement_timeout = '10s'"

    /// A sign-in's limits: an overlapping sign-in's lock is waited for, a stuck one is not
    /// (the callback fails, and its tokens go back to the EHR).
    static let signInLimits = "SET LOCAL lock_timeout = '15s'; SET LOCAL statement_timeout = '20s'"

    /// Advisory locks of this class are taken on sign-ins' bindings (`linkedSessions`).
    static let signInLockClass = 0x4246_4653 // "BFFS"

    /// The sessions recorded under any of `bindings` (a sign-in's own and those of its
    /// browser's other sign-ins under way) in the last 10 minutes, newest first: each is taken
    /// over if it may be (`takeOver`), so that a binding a copied login cookie pointed at
    /// another session elsewhere does not hide the one this browser's other tab recorded.
    /// Holds, to the end of the transaction, a lock on each binding, taken in one order: of two
    /// overlapping callbacks that share a binding, the second to lock finds the first's session.
    private func linkedSessions(_ bindings: [String], now: Date, on c: PooledConnection) async throws -> [String] {
        guard !bindings.isEmpty else { return [] }
        let keys = Set(bindings.map { Int(Int32(bitPattern: UInt32($0.prefix(8), radix: 16) ?? 0)) }).sorted()
        for key in keys {
            _ = try await c.query("SELECT pg_advisory_xact_lock(\(Self.signInLockClass), \(key)::int4)")
        }
        let rows = try await c.query("""
            SELECT session_hash FROM sign_in_sessions
            WHERE binding_hash = ANY(string_to_array(\(bindings.joined(separator: ",")), ','))
              AND created_at > to_timestamp(\(now.addingTimeInterval(-Self.retiredSessionMemory)))
            ORDER BY created_at DESC
            """)
        var sessions: [String] = []
        for row in rows where !sessions.contains(try row.string(0)) { sessions.append(try row.string(0)) }
        return sessions
    }

    /// Records `session` under each of `bindings`, so that the browser's other sign-ins under
    /// way, storing later, join it.
    private func link(_ bindings: [String], to session: String, now: Date, on c: PooledConnection) async throws {
        for binding in Set(bindings) {
            _ = try await c.query("""
                INSERT INTO sign_in_sessions (binding_hash, session_hash, created_at) VALUES (\(binding), \(session), to_timestamp(\(now)))
                ON CONFLICT (binding_hash) DO UPDATE SET session_hash = excluded.session_hash, created_at = excluded.created_at
                """)
        }
    }

    /// How long a replaced session identifier is remembered (`retired_sessions`): as long as
    /// a sign-in's state lives, the longest a sign-in begun before the replacement can take.
    static let retiredSessionMemory: TimeInterval = 600

    /// The live session `session` is now, locked: itself, or the one that took it over
    /// (another tab's sign-in meanwhile), or that one's successor, up to three replacements;
    /// nil when none is live.
    private func liveSuccessor(of session: String, now: Date, on c: PooledConnection) async throws -> String? {
        var current = session
        for _ in 0..<4 {
            let live = try await c.query("SELECT 1 FROM sessions WHERE id_hash = \(current) AND expires_at > to_timestamp(\(now)) FOR UPDATE")
            if !live.isEmpty { return current }
            let successor = try await c.query("""
                SELECT successor_hash FROM retired_sessions
                WHERE id_hash = \(current) AND retired_at > to_timestamp(\(now.addingTimeInterval(-Self.retiredSessionMemory)))
                """)
            guard let next = successor.first?[0] else { return nil }
            current = next
        }
        return nil
    }

    /// Moves the launches of `previous` (or, when another sign-in replaced it, of the live
    /// session that did) that have `launch`'s user into the session `next`, then deletes it
    /// with the rest and remembers it as replaced by `next`; returns the rest with their
    /// tokens. The row lock makes a concurrent sign-in from the same browser wait; it then
    /// follows the replacement to `next`.
    ///
    /// Only the session the browser's cookie names, live, ends other users' launches (a
    /// shared workstation's next sign-in): that cookie is the session's own credential. One
    /// found otherwise, through a replaced identifier (`retired_sessions`) or a login cookie's
    /// binding (`linkedSessions`), is taken over only when it holds no other user's launch:
    /// both are bearer values that a user may have copied off a shared workstation, and
    /// signed in anywhere they would end whoever signed in there after. (Two users' sign-ins
    /// overlapping in one browser then keep two sessions; the one whose cookie the browser
    /// loses ends by its idle timeout, its tokens revoked then.)
    private func takeOver(_ previous: String, into next: String, sameUserAs launch: LaunchRecord, fromLiveCookie: Bool, now: Date,
                          on c: PooledConnection) async throws -> [(LaunchRecord, TokenSet)] {
        guard let live = try await liveSuccessor(of: previous, now: now, on: c), live != next else { return [] }
        if live != previous || !fromLiveCookie {
            let others = try await c.query("""
                SELECT 1 FROM launches
                WHERE session_hash = \(live) AND NOT (iss = \(launch.iss) AND sub = \(launch.sub) AND sub <> '') LIMIT 1
                """)
            guard others.isEmpty else { return [] }
        }
        _ = try await c.query("""
            UPDATE launches SET session_hash = \(next)
            WHERE session_hash = \(live) AND iss = \(launch.iss) AND sub = \(launch.sub) AND sub <> ''
            """)
        let ended = try await deleteSession(hash: live, on: c)
        _ = try await c.query("""
            INSERT INTO retired_sessions (id_hash, retired_at, successor_hash) VALUES (\(live), to_timestamp(\(now)), \(next))
            ON CONFLICT (id_hash) DO UPDATE SET retired_at = excluded.retired_at, successor_hash = excluded.successor_hash
            """)
        return ended
    }

    public func rotateSession(idHash: String, ttl: TimeInterval, now: Date) async throws -> String? {
        let id = Identifier.make()
        // ON UPDATE CASCADE carries launches and hand-off codes over to the new hash.
        let rows = try await pool.query("""
            UPDATE sessions SET id_hash = \(Identifier.hash(id)), last_seen_at = to_timestamp(\(now)),
                   expires_at = to_timestamp(\(now.addingTimeInterval(ttl)))
            WHERE id_hash = \(idHash) AND expires_at > to_timestamp(\(now)) RETURNING 1
            """)
        return rows.isEmpty ? nil : id
    }

    public func findSession(id: String, now: Date) async throws -> SessionRecord? {
        let rows = try await pool.query("""
            SELECT id_hash, extract(epoch from created_at), extract(epoch from last_seen_at), extract(epoch from expires_at)
            FROM sessions WHERE id_hash = \(Identifier.hash(id)) AND expires_at > to_timestamp(\(now))
            """)
        guard let row = rows.first else { return nil }
        return SessionRecord(idHash: try row.string(0), createdAt: try row.date(1), lastSeenAt: try row.date(2), expiresAt: try row.date(3))
    }

    @discardableResult
    public func touchSession(_ session: SessionRecord, ttl: TimeInterval, now: Date) async throws -> Date {
        // At most a quarter of the lifetime: a session living no longer than the interval
        // would otherwise expire however busy its user was.
        let touchInterval = min(touchInterval, ttl / 4)
        guard now.timeIntervalSince(session.lastSeenAt) >= touchInterval else { return session.expiresAt }
        // The conditions make the write happen once per interval even when several requests
        // or instances touch at the same moment, and never revive an expired session.
        try await pool.query("""
            UPDATE sessions SET last_seen_at = to_timestamp(\(now)), expires_at = to_timestamp(\(now.addingTimeInterval(ttl)))
            WHERE id_hash = \(session.idHash) AND expires_at > to_timestamp(\(now))
              AND last_seen_at <= to_timestamp(\(now.addingTimeInterval(-touchInterval)))
            """)
        // Written now, or by a request that touched it at the same moment.
        return now.addingTimeInterval(ttl)
    }

    public func deleteSession(id: String) async throws -> [(LaunchRecord, TokenSet)] {
        try await pool.withTransaction { c in try await self.deleteSession(hash: Identifier.hash(id), on: c) }
    }

    public func proxyContext(sessionID: String, launchID: String?, now: Date) async throws -> ProxyContext? {
        let rows = try await pool.query("""
            SELECT s.id_hash, extract(epoch from s.created_at), extract(epoch from s.last_seen_at), extract(epoch from s.expires_at),
                   l.id_hash, l.iss, l.sub, l.fhir_user, l.scope, l.patient, l.context::text, extract(epoch from l.created_at),
                   t.access_token, extract(epoch from t.access_expires_at), t.version
            FROM sessions s
            LEFT JOIN LATERAL (SELECT * FROM launches WHERE session_hash = s.id_hash AND (\(launchID.map { Identifier.hash($0) })::text IS NULL OR id_hash = \(launchID.map { Identifier.hash($0) })::text)
                               ORDER BY created_at DESC, id_hash LIMIT 1) l ON true
            LEFT JOIN tokens t ON t.launch_hash = l.id_hash
            WHERE s.id_hash = \(Identifier.hash(sessionID)) AND s.expires_at > to_timestamp(\(now))
            """)
        guard let r = rows.first else { return nil }
        let session = SessionRecord(idHash: try r.string(0), createdAt: try r.date(1), lastSeenAt: try r.date(2), expiresAt: try r.date(3))
        guard let launchHash = r[4] else { return ProxyContext(session: session, launch: nil, accessToken: nil, accessTokenExpiresAt: nil, tokenVersion: 0) }
        let launch = LaunchRecord(idHash: launchHash, iss: try r.string(5), sub: try r.string(6), fhirUser: r[7], scope: try r.string(8),
                                  patient: r[9], contextJSON: try r.string(10), createdAt: try r.date(11))
        let access = try r.optionalBytes(12).flatMap { open($0, table: "tokens", column: "access_token", row: launchHash) }
        return ProxyContext(session: session, launch: launch, accessToken: access, accessTokenExpiresAt: try r.optionalDate(13),
                            tokenVersion: r[14].flatMap(Int.init) ?? 0)
    }

    public func deleteSession(ofLaunch launchHash: String) async throws -> (sessionHash: String, ended: [(LaunchRecord, TokenSet)])? {
        try await pool.withTransaction(limits: PostgresSessionStore.tokenReadLimits) { c in
            // The launch's session, locked; its hash may change meanwhile (a hand-off rotates
            // it, a sign-in of the same user takes the launch over): then it is read again.
            for _ in 0..<3 {
                let rows = try await c.query("SELECT session_hash FROM launches WHERE id_hash = \(launchHash)")
                guard let session = try rows.first?.string(0) else { return nil }
                let locked = try await c.query("SELECT 1 FROM sessions WHERE id_hash = \(session) FOR UPDATE")
                guard !locked.isEmpty else { continue }
                let owner = try await c.query("SELECT 1 FROM launches WHERE id_hash = \(launchHash) AND session_hash = \(session)")
                guard !owner.isEmpty else { continue }
                return (session, try await self.deleteSession(hash: session, on: c))
            }
            throw PostgresError.query(sqlState: nil, serverMessage: "the launch's session changed three times while it was being deleted")
        }
    }

    // MARK: Launches

    public func addLaunch(sessionID: String, _ launch: LaunchRecord, tokens: TokenSet) async throws {
        let sealed = try sealTokens(tokens, launchHash: launch.idHash)
        try await pool.withTransaction { c in
            try await self.insertLaunch(launch, tokens: tokens, sealed: sealed, sessionHash: Identifier.hash(sessionID), on: c)
        }
    }

    public func findLaunch(sessionID: String, launchID: String?) async throws -> LaunchRecord? {
        let sessionHash = Identifier.hash(sessionID)
        let rows: [PostgresRow]
        if let launchID {
            rows = try await pool.query("""
                SELECT \(raw: PostgresSessionStore.launchColumns) FROM launches
                WHERE id_hash = \(Identifier.hash(launchID)) AND session_hash = \(sessionHash)
                """)
            return try rows.first.map { try launch(from: $0) }
        }
        rows = try await pool.query("""
            SELECT \(raw: PostgresSessionStore.launchColumns) FROM launches
            WHERE session_hash = \(sessionHash) ORDER BY created_at DESC, id_hash LIMIT 1
            """)
        return try rows.first.map { try launch(from: $0) }
    }

    public func deleteLaunch(sessionID: String, launchHash: String) async throws -> TokenSet? {
        let sessionHash = Identifier.hash(sessionID)
        // Its lock may wait for a refresh under way: the limits of `tokenReadLimits`.
        return try await pool.withTransaction(limits: PostgresSessionStore.tokenReadLimits) { c in
            let owned = try await c.query("SELECT 1 FROM launches WHERE id_hash = \(launchHash) AND session_hash = \(sessionHash)")
            guard !owned.isEmpty else { return nil }
            // Locked before read, as in `deleteSession(hash:on:)`: a refresh's new tokens are the ones to revoke.
            let tokens = try await self.tokens(hash: launchHash, on: c, lock: true)
            _ = try await c.query("DELETE FROM launches WHERE id_hash = \(launchHash)")
            return tokens
        }
    }

    public func tokens(launchHash: String) async throws -> TokenSet? {
        try await pool.withConnection { c in try await self.tokens(hash: launchHash, on: c) }
    }

    public func withTokenLock<T: Sendable>(launchHash hash: String,
                                           _ body: @Sendable (TokenSet) async throws -> (TokenLockOutcome, T)) async throws -> T? {
        return try await pool.withTransaction(limits: PostgresSessionStore.tokenLockLimits) { c in
            guard let current = try await self.tokens(hash: hash, on: c, lock: true) else { return nil }
            let (outcome, value) = try await body(current)
            switch outcome {
            case .keep:
                break
            case .discard:
                _ = try await c.query("DELETE FROM tokens WHERE launch_hash = \(hash)")
            case .endLaunch:
                _ = try await c.query("DELETE FROM launches WHERE id_hash = \(hash)") // its tokens with it (ON DELETE CASCADE)
            case let .replace(replacement, scope):
                let sealed = try self.sealTokens(replacement, launchHash: hash)
                if let scope { _ = try await c.query("UPDATE launches SET scope = \(scope) WHERE id_hash = \(hash)") }
                _ = try await c.query("""
                    UPDATE tokens SET access_token = \(sealed.access), refresh_token = \(sealed.refresh.map(PostgresValue.bytes) ?? .null),
                           id_token = \(sealed.id.map(PostgresValue.bytes) ?? .null), response = \(sealed.response),
                           access_expires_at = to_timestamp(\(replacement.accessTokenExpiresAt.map(PostgresValue.date) ?? .null)),
                           version = version + 1, updated_at = now()
                    WHERE launch_hash = \(hash)
                    """)
            }
            return value
        }
    }

    /// A token lock's own limits, in place of the server's: its transaction waits for another
    /// instance's refresh, then sits idle while the EHR answers, which the refresher lets run
    /// until the EHR answers (at most 40 s) rather than cut it short and lose a rotated
    /// refresh token. A DBA's `statement_timeout = '100ms'` would
    /// cancel the wait (where the other instance's new tokens were a moment away), and a short
    /// `idle_in_transaction_session_timeout` would end the session after the EHR rotated the
    /// refresh token and before the new one was stored (then the grant is lost). A lock held
    /// past 20 s ends the wait (the refresher answers 503, the session kept); each statement,
    /// a wait included, stops at 25 s; the transaction may sit idle 60 s, past the EHR's
    /// longest answer.
    static let tokenLockLimits = """
        SET LOCAL lock_timeout = '20s'; SET LOCAL statement_timeout = '25s'; SET LOCAL idle_in_transaction_session_timeout = '60s'
        """

    /// The limits of a transaction that reads tokens to revoke them, locked: it may wait
    /// for a refresh under way (the EHR's answer, up to some 35 s), whatever the database's
    /// own `lock_timeout` and `statement_timeout`.
    static let tokenReadLimits = """
        SET LOCAL lock_timeout = '45s'; SET LOCAL statement_timeout = '50s'
        """

    // MARK: Mobile hand-off

    public func saveHandoff(code: String, sessionHash: String, challenge: String, expiresAt: Date) async throws {
        try await pool.query("""
            INSERT INTO handoff_codes (code_hash, session_hash, challenge, expires_at)
            VALUES (\(Identifier.hash(code)), \(sessionHash), \(challenge), to_timestamp(\(expiresAt)))
            """)
    }

    public func consumeHandoff(code: String, now: Date) async throws -> (sessionHash: String, challenge: String)? {
        let rows = try await pool.query("""
            DELETE FROM handoff_codes WHERE code_hash = \(Identifier.hash(code))
            RETURNING session_hash, challenge, extract(epoch from expires_at)
            """)
        guard let row = rows.first, try row.date(2) > now else { return nil }
        return (try row.string(0), try row.string(1))
    }

    // MARK: Audit and upkeep

    public func endExpiredSessions(now: Date, limit: Int) async throws -> [(LaunchRecord, TokenSet)] {
        try await pool.withTransaction { c in
            let expired = try await c.query("""
                SELECT id_hash FROM sessions s WHERE expires_at <= to_timestamp(\(now))
                  AND EXISTS (SELECT 1 FROM launches l WHERE l.session_hash = s.id_hash)
                ORDER BY expires_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
                """)
            var ended: [(LaunchRecord, TokenSet)] = []
            for row in expired { ended += try await self.deleteSession(hash: try row.string(0), on: c) }
            return ended
        }
    }

    public func sweepExpired(now: Date, auditRetentionDays: Int) async throws -> Int {
        // Retention's limits: after a long stop there may be many rows to delete.
        let rows = try await pool.withTransaction(limits: PostgresSessionStore.retentionLimits) { c in try await c.query("""
            WITH p AS (DELETE FROM pending_authorizations WHERE expires_at <= to_timestamp(\(now)) RETURNING 1),
                 h AS (DELETE FROM handoff_codes WHERE expires_at <= to_timestamp(\(now)) RETURNING 1),
                 s AS (DELETE FROM sessions s WHERE expires_at <= to_timestamp(\(now))
                         AND NOT EXISTS (SELECT 1 FROM launches l WHERE l.session_hash = s.id_hash) RETURNING 1),
                 r AS (DELETE FROM retired_sessions
                         WHERE retired_at <= to_timestamp(\(now.addingTimeInterval(-Self.retiredSessionMemory)))),
                 l AS (DELETE FROM sign_in_sessions
                         WHERE created_at <= to_timestamp(\(now.addingTimeInterval(-Self.retiredSessionMemory)))),
                 -- Audit write ids, long settled (on the database's clock, which stamped them).
                 b AS (DELETE FROM audit_batches WHERE stored_at < now() - interval '7 days')
            SELECT (SELECT count(*) FROM p) + (SELECT count(*) FROM h) + (SELECT count(*) FROM s)
            """) }
        let expired = try rows.first?.int(0) ?? 0
        return expired + (try await deleteAudit(before: now.addingTimeInterval(-Double(auditRetentionDays) * 86_400)))
    }

    /// A retention chunk's limits (`deleteAudit`).
    static let retentionLimits = "SET LOCAL lock_timeout = '10s'; SET LOCAL statement_timeout = '300s'"

    /// Audit rows deleted per statement (each its own transaction).
    static let auditDeleteChunk = 10_000

    /// Deletes audit entries older than `cutoff`, oldest first, a chunk per statement: a
    /// first sweep after a long stop, or after the retention was shortened, may have years
    /// of rows to remove, which one statement would hold in a single huge transaction. The
    /// chunk is found on the primary key and deleted by row address (a `Tid Scan`; matching
    /// on (at, id) instead made PostgreSQL scan the whole table for each chunk).
    func deleteAudit(before cutoff: Date, chunk: Int = PostgresSessionStore.auditDeleteChunk) async throws -> Int {
        var total = 0
        while true {
            // Its own limits, in place of a DBA's short statement_timeout (which would fail
            // every sweep, and retention with it): a chunk may wait 10 s for a lock and run 5 min.
            let rows = try await pool.withTransaction(limits: PostgresSessionStore.retentionLimits) { c in
                try await c.query("""
                    WITH a AS (DELETE FROM audit_events WHERE ctid = ANY(ARRAY(
                        SELECT ctid FROM audit_events WHERE at < to_timestamp(\(cutoff)) ORDER BY at, id LIMIT \(chunk))) RETURNING 1)
                    SELECT count(*) FROM a
                    """)
            }
            let deleted = try rows.first?.int(0) ?? 0
            total += deleted
            if deleted < chunk { return total }
        }
    }
}
