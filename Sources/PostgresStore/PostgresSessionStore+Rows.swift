import Foundation
import Sessions

extension PostgresSessionStore {
    static let launchColumns = "id_hash, iss, sub, fhir_user, scope, patient, context::text, extract(epoch from created_at)"

    struct SealedTokens {
        let access: [UInt8]
        let refresh: [UInt8]?
        let id: [UInt8]?
        let response: [UInt8]
    }

    func sealTokens(_ t: TokenSet, launchHash: String) throws -> SealedTokens {
        SealedTokens(
            access: try cipher.seal(t.accessToken, table: "tokens", column: "access_token", row: launchHash),
            refresh: try t.refreshToken.map { try cipher.seal($0, table: "tokens", column: "refresh_token", row: launchHash) },
            id: try t.idToken.map { try cipher.seal($0, table: "tokens", column: "id_token", row: launchHash) },
            response: try cipher.seal(t.responseJSON, table: "tokens", column: "response", row: launchHash))
    }

    func insertSession(hash: String, ttl: TimeInterval, now: Date, on c: PooledConnection) async throws {
        _ = try await c.query("""
            INSERT INTO sessions (id_hash, created_at, last_seen_at, expires_at)
            VALUES (\(hash), to_timestamp(\(now)), to_timestamp(\(now)), to_timestamp(\(now.addingTimeInterval(ttl))))
            """)
    }

    /// Deletes the session `hash` and, through the cascade, its launches and their tokens;
    /// returns the launches whose tokens still open, with those tokens (for revocation).
    func deleteSession(hash: String, on c: PooledConnection) async throws -> [(LaunchRecord, TokenSet)] {
        // The session row, then each launch's token row (in one order: no deadlock with
        // another delete), locked before they are read: a refresh under way holds its token
        // row until the EHR's new tokens are stored, and those, not the ones it replaces,
        // are the ones to revoke. That wait may last an EHR's answer, whatever the
        // database's own limits.
        try await c.run { try $0.executeScript(PostgresSessionStore.tokenReadLimits) }
        _ = try await c.query("SELECT 1 FROM sessions WHERE id_hash = \(hash) FOR UPDATE")
        let launches = try await c.query("SELECT id_hash FROM launches WHERE session_hash = \(hash) ORDER BY id_hash")
        var result: [(LaunchRecord, TokenSet)] = []
        for row in launches {
            let launchHash = try row.string(0)
            if let launch = try await launch(byHash: launchHash, on: c), let tokens = try await tokens(hash: launchHash, on: c, lock: true) {
                result.append((launch, tokens))
            }
        }
        _ = try await c.query("DELETE FROM sessions WHERE id_hash = \(hash)")
        return result
    }

    /// Inserts `launch` into the session `sessionHash` with its tokens (`sealed` is `tokens`
    /// sealed for the launch's row); call it inside a transaction, so the two rows go together.
    func insertLaunch(_ launch: LaunchRecord, tokens: TokenSet, sealed: SealedTokens, sessionHash: String,
                      on c: PooledConnection) async throws {
        _ = try await c.query("""
            INSERT INTO launches (id_hash, session_hash, iss, sub, fhir_user, scope, patient, context, created_at)
            VALUES (\(launch.idHash), \(sessionHash), \(launch.iss), \(launch.sub), \(launch.fhirUser), \(launch.scope),
                    \(launch.patient), \(launch.contextJSON)::jsonb, to_timestamp(\(launch.createdAt)))
            """)
        _ = try await c.query("""
            INSERT INTO tokens (launch_hash, access_token, refresh_token, id_token, response, access_expires_at, version)
            VALUES (\(launch.idHash), \(sealed.access), \(sealed.refresh.map(PostgresValue.bytes) ?? .null),
                    \(sealed.id.map(PostgresValue.bytes) ?? .null), \(sealed.response),
                    to_timestamp(\(tokens.accessTokenExpiresAt.map(PostgresValue.date) ?? .null)), \(tokens.version))
            """)
    }

    func tokens(hash: String, on c: PooledConnection, lock: Bool = false) async throws -> TokenSet? {
        let rows = try await c.query("""
            SELECT access_token, refresh_token, id_token, response, extract(epoch from access_expires_at), version
            FROM tokens WHERE launch_hash = \(hash) \(raw: lock ? "FOR UPDATE" : "")
            """)
        guard let r = rows.first else { return nil }
        // Tokens that do not all open are no tokens: the launch cannot be used any more.
        guard let access = open(try r.bytes(0), table: "tokens", column: "access_token", row: hash),
              let response = open(try r.bytes(3), table: "tokens", column: "response", row: hash) else { return nil }
        var refresh: String?, id: String?
        if let sealed = try r.optionalBytes(1) {
            guard let opened = open(sealed, table: "tokens", column: "refresh_token", row: hash) else { return nil }
            refresh = opened
        }
        if let sealed = try r.optionalBytes(2) {
            guard let opened = open(sealed, table: "tokens", column: "id_token", row: hash) else { return nil }
            id = opened
        }
        return TokenSet(accessToken: access, refreshToken: refresh, idToken: id, accessTokenExpiresAt: try r.optionalDate(4),
                        responseJSON: response, version: try r.int(5))
    }

    /// The plaintext of a stored secret, or nil (with a warning) when neither the token key
    /// nor a fallback opens it: after `BFF_TOKEN_KEY` changed without the old key among
    /// `BFF_TOKEN_KEY_FALLBACKS`, or an instance runs with a wrong key.
    /// The warning comes at most once a minute, with how many more happened meanwhile: with
    /// a wrong key, every request of every session would log one.
    func open(_ sealed: [UInt8], table: String, column: String, row: String) -> String? {
        do { return try cipher.open(sealed, table: table, column: column, row: row) } catch {
            if let more = unopenedSecrets.due(now: Date()) {
                logger.warning("a stored secret does not open with BFF_TOKEN_KEY or BFF_TOKEN_KEY_FALLBACKS: its request is answered 401 session-ended, and the row is kept (the right key opens it again)",
                               metadata: ["store.table": .string(table), "store.column": .string(column),
                                          "store.more_since_last_warning": .stringConvertible(more)])
            }
            return nil
        }
    }

    func launch(byHash hash: String, on c: PooledConnection) async throws -> LaunchRecord? {
        let rows = try await c.query("SELECT \(raw: PostgresSessionStore.launchColumns) FROM launches WHERE id_hash = \(hash)")
        return try rows.first.map { try launch(from: $0) }
    }

    func launch(from r: PostgresRow) throws -> LaunchRecord {
        LaunchRecord(idHash: try r.string(0), iss: try r.string(1), sub: try r.string(2), fhirUser: r[3], scope: try r.string(4),
                     patient: r[5], contextJSON: try r.string(6), createdAt: try r.date(7))
    }
}
