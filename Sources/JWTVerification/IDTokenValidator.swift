import Foundation
import JSON

/// What a valid ID token says.
public struct IDTokenClaims: Sendable {
    public let subject: String
    public let fhirUser: String?
    public let claims: JSONValue
}

/// Validates OpenID Connect ID tokens (Core §3.1.3.7) exactly as smart-bff's contract
/// says: compact JWS ≤ 16 KiB, RS256 only, no `crit`, key from the issuer's JWKS by `kid`,
/// `iss`, `aud` (the client id alone), `azp`, `exp`, `iat` (60 s leeway), `sub`, `nonce`.
public struct IDTokenValidator: Sendable {
    public let jwks: JWKSCache
    public let leeway: TimeInterval
    /// The current time; tests set it.
    public let now: @Sendable () -> Date

    public init(jwks: JWKSCache, leeway: TimeInterval = 60, now: @escaping @Sendable () -> Date = { Date() }) {
        self.jwks = jwks
        self.leeway = leeway
        self.now = now
    }

    public func validate(_ token: String, issuer: String, clientID: String, nonce: String?, jwksURL: String)
        async throws(JWTError) -> IDTokenClaims {
        let jws = try CompactJWS(token)
        let kid = try JWSVerifier.checkHeader(jws)
        let key = try await jwks.key(for: kid, jwksURL: jwksURL)
        try JWSVerifier.verifySignature(jws, key: key)
        return try checkClaims(jws.payload, issuer: issuer, clientID: clientID, nonce: nonce)
    }

    /// The claim rules on an already verified payload.
    public func checkClaims(_ c: JSONValue, issuer: String, clientID: String, nonce: String?) throws(JWTError) -> IDTokenClaims {
        guard c["iss"]?.stringValue == issuer else { throw .claim("iss", "is not the issuer") }
        switch c["aud"] {
        case let .string(aud)?:
            guard aud == clientID else { throw .claim("aud", "is not the client id") }
        case let .array(auds)?:
            guard auds.count == 1, auds[0].stringValue == clientID else { throw .claim("aud", "must hold only the client id") }
        default:
            throw .claim("aud", "is missing")
        }
        if let azp = c["azp"] { guard azp.stringValue == clientID else { throw .claim("azp", "is not the client id") } }
        let now = self.now().timeIntervalSince1970
        guard let exp = c["exp"]?.doubleValue else { throw .claim("exp", "is missing or not a number") }
        guard exp + leeway > now else { throw .claim("exp", "is in the past") }
        guard let iat = c["iat"]?.doubleValue else { throw .claim("iat", "is missing or not a number") }
        guard iat <= now + leeway else { throw .claim("iat", "is in the future") }
        if let nbf = c["nbf"] {
            guard let t = nbf.doubleValue, t <= now + leeway else { throw .claim("nbf", "is in the future") }
        }
        guard let sub = c["sub"]?.stringValue, !sub.isEmpty else { throw .claim("sub", "is missing") }
        if let nonce {
            guard c["nonce"]?.stringValue == nonce else { throw .claim("nonce", "does not match the request") }
        }
        if let fhirUser = c["fhirUser"], fhirUser.stringValue == nil { throw .claim("fhirUser", "is not a string") }
        return IDTokenClaims(subject: sub, fhirUser: c["fhirUser"]?.stringValue, claims: c)
    }
}
