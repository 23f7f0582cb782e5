import Foundation
import HTTPCore
import JSON
import JWTVerification
import PostgresStore
import SMART

/// `/readyz`, `/metrics` and `/.well-known/jwks.json`.
struct OperationsHandlers: Sendable {
    let services: BFFServices

    func readyz(_ request: Request) async throws -> Response {
        let (database, migrations) = await services.readiness.check()
        let statuses = await services.metadata.allStatuses()
        let issuers: [JSONValue] = services.registrations.keys.sorted().map { iss in
            let s = statuses[iss]
            return ["iss": .string(iss), "discovery": .string(s?.discovery ?? "not yet"), "jwks": .string(s?.jwks ?? "not yet"),
                    "checked_at": s?.checkedAt.map { .string(SessionHandlers.timestamp($0)) } ?? .null]
        }
        let ready = (database == .up || database == .busy) && migrations == .current
        let body: JSONValue = ["status": .string(ready ? "ready" : "unavailable"), "database": .string(database.rawValue),
                               "migrations": .string(migrations.rawValue), "issuers": .array(issuers)]
        return SessionHandlers.noStore(.json(body.bytes, status: ready ? .ok : .serviceUnavailable))
    }

    func metrics(_ request: Request) async throws -> Response {
        let pool = services.readiness.pool
        // A scrape answers within a second whatever the database does (a stalled server, a
        // table lock): past that, with the last count, while the count goes on for the next.
        let active = await services.activeSessions.value(waitingAtMost: .seconds(1)) { [pool] in
            try? await pool.query("SELECT count(*) FROM sessions WHERE expires_at > now()").first?.int(0)
        } ?? nil
        let text = services.metrics.render(activeSessions: active, pool: pool.usage, audit: services.audit.status)
        return Response(status: .ok, contentType: "text/plain; version=0.0.4; charset=utf-8", body: Array(text.utf8))
    }

    /// The public halves of the client-authentication keys, to register with EHRs.
    func jwks() -> Response {
        var keys: [JSONValue] = []
        for registration in services.registrations.values.sorted(by: { $0.iss < $1.iss }) {
            guard let key = services.clientKeys[registration.iss], let kid = registration.privateKeyID else { continue }
            switch key {
            case let .rsa(rsa): keys.append(JWK.encode(rsa.publicKey, keyID: kid, algorithm: "RS384"))
            case let .p384(ec): keys.append(JWK.encode(ec.publicKey, keyID: kid))
            }
        }
        var seen = Set<String>()
        keys = keys.filter { seen.insert($0.serialized()).inserted }
        return .json((["keys": .array(keys)] as JSONValue).bytes)
    }
}
