import Foundation
import HTTPCore
import Sessions

/// The session and launch a front-end request acts for.
struct ResolvedSession: Sendable {
    /// The raw session identifier (from the cookie or the bearer session token).
    let sessionID: String
    let session: SessionRecord
    let launch: LaunchRecord?
}

/// Finds the session of a request: `Authorization: Bearer <session token>` (mobile, no CSRF
/// header needed) or the session cookie (then `X-CSRF: 1` is required). `X-BFF-Launch`
/// selects the launch; without it the session's most recent launch is used.
struct SessionResolver: Sendable {
    let services: BFFServices

    func resolve(_ request: Request, requireLaunch: Bool = true) async throws -> ResolvedSession {
        let sessionID = try credential(request)
        guard let session = try await services.store.findSession(id: sessionID, now: services.now()) else {
            throw Problems.unauthenticated()
        }
        let launchID = try launchHeader(request)
        let launch = try await services.store.findLaunch(sessionID: sessionID, launchID: launchID)
        if launch == nil && (requireLaunch || launchID != nil) { throw Problems.unauthenticated(launchID == nil ? "No valid session." : "Unknown launch.") }
        var touched = session
        if let expiresAt = try? await services.store.touchSession(session, ttl: TimeInterval(services.configuration.sessionTTL),
                                                                  now: services.now()) {
            touched.expiresAt = expiresAt // what /session reports: the expiry this request gave it
        }
        return ResolvedSession(sessionID: sessionID, session: touched, launch: launch)
    }

    /// Whether the request's session (cookie or bearer session token) is live, whatever
    /// launch it names.
    func hasSession(_ request: Request) async -> Bool {
        guard let sessionID = try? credential(request) else { return false }
        return (try? await services.store.findSession(id: sessionID, now: services.now())) != nil
    }

    /// The request's session identifier (bearer session token, or cookie with `X-CSRF: 1`),
    /// live or not.
    func sessionID(of request: Request) -> String? {
        try? credential(request)
    }

    /// The FHIR proxy's resolution: session, launch and access token, from the proxy cache
    /// or else in one query (which also extends the session when due).
    func resolveForProxy(_ request: Request) async throws -> ProxySessionCache.Entry {
        let key = ProxySessionCache.Key(sessionID: try credential(request), launchID: try launchHeader(request))
        let services = self.services, now = services.now()
        if let entry = services.proxyCache.entry(for: key, now: now) { return entry } // the hot path: no closure made
        return try await services.proxyCache.entry(for: key, now: now) { generation in
            guard let context = try await services.store.proxyContext(sessionID: key.sessionID, launchID: key.launchID, now: now) else {
                throw Problems.unauthenticated()
            }
            guard let launch = context.launch else { throw Problems.unauthenticated(key.launchID == nil ? "No valid session." : "Unknown launch.") }
            // Only registered issuers are contacted. The issuers file can change across a
            // restart while sessions stay; registrations never change in a running process,
            // so cached entries need no second look.
            guard services.registration(for: launch.iss) != nil else { throw Problems.issuerNotRegistered() }
            _ = try? await services.store.touchSession(context.session, ttl: TimeInterval(services.configuration.sessionTTL), now: now)
            return services.proxyCache.store(context, launch: launch, for: key, generation: generation, now: now)
        }
    }

    /// Whether the request's credential is the session cookie (no bearer session token).
    func authenticatesByCookie(_ request: Request) -> Bool {
        SessionResolver.bearerAuthorization(request) == nil && services.cookie.read(from: request) != nil
    }

    /// The request's `Authorization` value when its scheme is `Bearer`.
    private static func bearerAuthorization(_ request: Request) -> String? {
        guard let authorization = request.headers["Authorization"], authorization.utf8.count >= 6,
              authorization.prefix(6).lowercased() == "bearer", authorization.utf8.count == 6 || authorization.dropFirst(6).first == " " else {
            return nil
        }
        return authorization
    }

    /// The session identifier: a bearer session token, or the cookie (which needs `X-CSRF: 1`).
    /// `Authorization` of another scheme is not the BFF's (a proxy in front that asks for
    /// Basic credentials passes them on) and leaves the cookie to count.
    private func credential(_ request: Request) throws -> String {
        let sessionID: String
        if let authorization = SessionResolver.bearerAuthorization(request) {
            guard authorization.count > 7 else { throw Problems.unauthenticated() }
            sessionID = String(authorization.dropFirst(7))
        } else if let cookie = services.cookie.read(from: request) {
            guard request.headers["X-CSRF"] == "1" else { throw Problems.csrf() }
            sessionID = cookie
        } else {
            throw Problems.unauthenticated()
        }
        guard sessionID.utf8.count <= 128 else { throw Problems.unauthenticated() }
        return sessionID
    }

    private func launchHeader(_ request: Request) throws -> String? {
        let launchID = request.headers["X-BFF-Launch"]
        if let launchID, launchID.isEmpty || launchID.utf8.count > 128 { throw Problems.unauthenticated("Unknown launch.") }
        return launchID
    }
}
