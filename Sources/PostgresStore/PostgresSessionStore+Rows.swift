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

    func tokens(hash: String, on c: PooledConnection, lock: Bool = false) async throws -> TokenSet? {
        let rows = try await c.query("""
            SELECT access_token, refresh_token, id_token, response, extract(epoch from access_expires_at), version
            FROM tokens WHERE launch_hash = \(hash) \(raw: lock ? "FOR UPDATE" : "")
            """)
        guard let r = rows.first else { return nil }
        return TokenSet(
            accessToken: try cipher.open(try r.bytes(0), table: "tokens", column: "access_token", row: hash),
            refreshToken: try r.optionalBytes(1).map { try cipher.open($0, table: "tokens", column: "refresh_token", row: hash) },
            idToken: try r.optionalBytes(2).map { try cipher.open($0, table: "tokens", column: "id_token", row: hash) },
            accessTokenExpiresAt: try r.optionalDate(4),
            responseJSON: try cipher.open(try r.bytes(3), table: "tokens", column: "response", row: hash),
            version: try r.int(5))
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
