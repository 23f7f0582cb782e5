import Cryptography
import Foundation
import HTTPCore
import JSON
import SMART
import Sessions

/// `/session`, `/context`, `/logout` and `/session/handoff`: what the front end may know
/// about its session, and how it ends.
struct SessionHandlers: Sendable {
    let services: BFFServices
    var resolver: SessionResolver { SessionResolver(services: services) }

    func session(_ request: Request) async throws -> Response {
        let resolved = try await resolver.resolve(request)
        let launch = resolved.launch!
        try await requireReadableTokens(launch)
        func opt(_ s: String?) -> JSONValue { s.map { .string($0) } ?? .null }
        let body: JSONValue = [
            "iss": .string(launch.iss), "sub": .string(launch.sub), "fhirUser": opt(launch.fhirUser), "scope": .string(launch.scope),
            "patient": opt(launch.patient), "expires_at": .string(SessionHandlers.timestamp(resolved.session.expiresAt)),
        ]
        return SessionHandlers.noStore(.json(body.bytes))
    }

    func context(_ request: Request) async throws -> Response {
        let resolved = try await resolver.resolve(request)
        try await requireReadableTokens(resolved.launch!)
        return SessionHandlers.noStore(.json(Array(resolved.launch!.contextJSON.utf8)))
    }

    /// A launch whose tokens no key of this server opens (`BFF_TOKEN_KEY` changed without the
    /// old one among the fallbacks) is over here, as at `/fhir`: `/session` must not show it
    /// alive, and a front end polling it keep it so, while every read fails.
    private func requireReadableTokens(_ launch: LaunchRecord) async throws {
        guard try await services.store.tokens(launchHash: launch.idHash) != nil else { throw Problems.tokensUnreadable() }
    }

    /// Ends the launch named by `X-BFF-Launch`, or the whole session; revokes its tokens at
    /// the EHR when it has a revocation endpoint. Logs out locally even when revocation fails.
    func logout(_ request: Request) async throws -> Response {
        var response = Response(status: .noContent)
        response.headers.replace("Cache-Control", "no-store")
        let resolved: ResolvedSession
        do { resolved = try await resolver.resolve(request, requireLaunch: false) } catch let error as HTTPError where error.status.code == 401 {
            // A launch that already ended (a second logout from its tab): nothing to end, and
            // the session's cookie stays, which the browser's other tabs use.
            var launchGone = false
            if request.headers["X-BFF-Launch"] != nil { launchGone = await resolver.hasSession(request) }
            if !launchGone { await endExpiredSession(of: request) }
            // Only the cookie's own session ending expires it: a stale bearer token beside a
            // live cookie leaves the cookie's session, and so the cookie, as they were.
            if !launchGone && resolver.authenticatesByCookie(request) { response.headers.add("Set-Cookie", services.cookie.expire) }
            return response
        }
        var ended: [(LaunchRecord, TokenSet)] = []
        defer { services.proxyCache.invalidate(sessionHash: resolved.session.idHash) }
        if request.headers["X-BFF-Launch"] != nil, let launch = resolved.launch {
            if let tokens = try await services.store.deleteLaunch(sessionID: resolved.sessionID, launchHash: launch.idHash) {
                ended.append((launch, tokens))
            }
            // The session's last launch ended: so does the session, which holds nothing now.
            // Its cookie is left alone: another tab's sign-in answered meanwhile may have set
            // the browser's next one, which an expiry here would delete.
            if try await services.store.findLaunch(sessionID: resolved.sessionID, launchID: nil) == nil {
                ended += try await services.store.deleteSession(id: resolved.sessionID)
            }
        } else {
            ended = try await services.store.deleteSession(id: resolved.sessionID)
            if resolver.authenticatesByCookie(request) { response.headers.add("Set-Cookie", services.cookie.expire) }
        }
        // At once, not after revocation, which waits on the EHR: meanwhile another tab's read
        // must not be served from this instance's cache. (The `defer` covers a failed delete.)
        services.proxyCache.invalidate(sessionHash: resolved.session.idHash)
        await services.revokeTokens(of: ended)
        return response
    }

    /// A session past its expiry keeps its rows, and its tokens stay valid at the EHR, until
    /// the sweeper deletes them: a logout with its identifier (the user coming back to an
    /// idle tab) deletes it now and revokes its tokens, as a logout promises.
    private func endExpiredSession(of request: Request) async {
        // Only a session known to have expired: a database error says nothing about it (a
        // live session's other tabs must keep their launches).
        guard let sessionID = resolver.sessionID(of: request),
              let live = try? await services.store.findSession(id: sessionID, now: services.now()).map({ _ in true }) ?? false, !live,
              let ended = try? await services.store.deleteSession(id: sessionID), !ended.isEmpty else { return }
        services.proxyCache.invalidate(sessionHash: Identifier.hash(sessionID))
        await services.revokeTokens(of: ended)
    }

    /// `POST /session/handoff`: trades a one-time code and its PKCE-style verifier for a
    /// session token. A wrong verifier burns the code (and its session).
    func handoff(_ request: Request) async throws -> Response {
        guard request.headers["Content-Type"]?.lowercased().hasPrefix("application/json") == true else {
            throw HTTPError(.unsupportedMediaType, detail: "Send application/json.")
        }
        guard let body = try? JSONParser.parse(request.body), let code = body["handoff"]?.stringValue, code.utf8.count <= 256 else {
            throw Problems.badRequest("Expected {\"handoff\": code, \"handoff_verifier\": verifier}.")
        }
        // No verifier (or not a string) is a wrong one: it burns the code as any other does.
        let verifier = body["handoff_verifier"]?.stringValue ?? ""
        guard let (sessionHash, challenge) = try await services.store.consumeHandoff(code: code, now: services.now()) else {
            throw Problems.badRequest("Unknown, expired or already used hand-off code.", type: "invalid-handoff")
        }
        // Checked only now that the code is used up: a verifier of the wrong length, or with a
        // character RFC 7636 §4.1 does not allow, is a wrong verifier too, and burns the code.
        // The length goes first, so no more than 128 bytes are hashed.
        guard (43...128).contains(verifier.utf8.count), verifier.utf8.allSatisfy(PKCE.isUnreserved),
              constantTimeEquals(Array(PKCE.challenge(for: verifier).utf8), Array(challenge.utf8)) else {
            // The session ends, and its tokens are revoked as at logout: whoever holds the
            // code without its verifier may have seen the sign-in.
            if let id = try await services.store.rotateSession(idHash: sessionHash, ttl: 1, now: services.now()) {
                await services.revokeTokens(of: try await services.store.deleteSession(id: id))
            }
            throw Problems.badRequest("The hand-off verifier does not match.", type: "invalid-handoff")
        }
        let ttl = TimeInterval(services.configuration.sessionTTL)
        guard let token = try await services.store.rotateSession(idHash: sessionHash, ttl: ttl, now: services.now()) else {
            throw Problems.badRequest("The session of this hand-off has ended.", type: "invalid-handoff")
        }
        let body2: JSONValue = ["session_token": .string(token),
                                "expires_at": .string(SessionHandlers.timestamp(services.now().addingTimeInterval(ttl)))]
        return SessionHandlers.noStore(.json(body2.bytes))
    }

    static func noStore(_ response: Response) -> Response {
        var r = response
        r.headers.replace("Cache-Control", "no-store")
        return r
    }

    static func timestamp(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        return f.string(from: date)
    }
}
