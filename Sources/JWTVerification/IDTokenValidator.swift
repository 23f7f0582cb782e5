import Cryptography
import Foundation
import JSON

/// Validates OpenID Connect ID tokens (Core §3.1.3.7) exactly as smart-bff's contract says:
/// a compact JWS of at most 16 KiB, RS256 only, no `crit`; the key is the issuer's JWKS
/// entry with the token's `kid` (see `JWKSCache`, `JWKSet`, `RSAKeyPolicy`); then the claims
/// `iss`, `aud` (the client id alone), `azp`, `exp`, `iat` (60 s leeway), `nbf` if present,
/// `sub` and `nonce`. Times must be JSON numbers.
public struct IDTokenValidator: Sendable {
    public let jwks: JWKSCache
    /// Allowed clock skew for `exp`, `iat` and `nbf`, in seconds.
    public let leeway: TimeInterval
    /// The current time (injected; tests fix it).
    public let now: @Sendable () -> Date

    public init(jwks: JWKSCache, leeway: TimeInterval = 60, now: @escaping @Sendable () -> Date = { Date() }) {
        self.jwks = jwks
        self.leeway = leeway
        self.now = now
    }

    /// Parses, checks the header, fetches the key, verifies the signature, then the claims.
    /// - Parameters:
    ///   - issuer: the issuer's OpenID `issuer` (exact string match with `iss`).
    ///   - clientID: smart-bff's client id at that issuer.
    ///   - nonce: the nonce sent in the authorization request; nil when none was sent, and
    ///     then the token must not carry one either.
    ///   - jwksURL: the issuer's `jwks_uri`.
    public func validate(_ token: String, issuer: String, clientID: String, nonce: String?, jwksURL: String)
        async throws(JWTError) -> IDTokenClaims {
        let jws = try CompactJWS(token)
        let kid = try JWSVerifier.checkHeader(jws)
        let key = try await jwks.key(for: kid, issuer: issuer, jwksURL: jwksURL)
        try JWSVerifier.verifySignature(jws, key: key)
        return try checkClaims(jws.payload, issuer: issuer, clientID: clientID, nonce: nonce)
    }

    /// The claim rules on an already verified payload.
    public func checkClaims(_ c: JSONValue, issuer: String, clientID: String, nonce: String?) throws(JWTError) -> IDTokenClaims {
        // Identifiers compare byte for byte (OpenID Connect Core §3.1.3.7: exact match): Swift's
        // `==` takes canonically equivalent Unicode (K and the Kelvin sign) for equal.
        func same(_ value: String?, _ expected: String) -> Bool { value.map { $0.utf8.elementsEqual(expected.utf8) } ?? false }
        guard same(c["iss"]?.stringValue, issuer) else {
            // Signed by the issuer's key: a misnamed issuer (discovery's, or the registration's),
            // which the operator fixes from what the log says the EHR sends.
            let named = c["iss"]?.stringValue.map { "\"" + String($0.prefix(200)) + "\"" } ?? "missing"
            throw .claim("iss", "is \(named), not the issuer \"\(issuer)\"")
        }
        switch c["aud"] {
        case let .string(aud)?:
            guard same(aud, clientID) else { throw .claim("aud", "is not the client id") }
        case let .array(auds)?:
            guard auds.count == 1, same(auds[0].stringValue, clientID) else { throw .claim("aud", "must hold only the client id") }
        default:
            throw .claim("aud", "is missing or not a string or array")
        }
        if let azp = c["azp"] { guard same(azp.stringValue, clientID) else { throw .claim("azp", "is not the client id") } }
        let now = self.now().timeIntervalSince1970
        guard let exp = c["exp"]?.doubleValue else { throw .claim("exp", "is missing or not a number") }
        guard exp + leeway > now else { throw .claim("exp", "is in the past") }
        guard let iat = c["iat"]?.doubleValue else { throw .claim("iat", "is missing or not a number") }
        guard iat <= now + leeway else { throw .claim("iat", "is in the future") }
        if let nbf = c["nbf"] {
            guard let t = nbf.doubleValue, t <= now + leeway else { throw .claim("nbf", "is in the future or not a number") }
        }
        guard let sub = c["sub"]?.stringValue, !sub.isEmpty else { throw .claim("sub", "is missing or empty") }
        // An identifier, stored and audited as text: a control character (U+0000 above all,
        // which PostgreSQL stores in no text column) is nothing an EHR means.
        guard !IDTokenValidator.holdsControl(sub) else { throw .claim("sub", "holds a control character") }
        if let nonce {
            guard let sent = c["nonce"]?.stringValue, constantTimeEquals(Array(sent.utf8), Array(nonce.utf8)) else {
                throw .claim("nonce", "does not match the request")
            }
        } else if c["nonce"] != nil {
            throw .claim("nonce", "present although none was sent")
        }
        if let fhirUser = c["fhirUser"] {
            guard let url = fhirUser.stringValue else { throw .claim("fhirUser", "is not a string") }
            guard !IDTokenValidator.holdsControl(url) else { throw .claim("fhirUser", "holds a control character") }
        }
        return IDTokenClaims(subject: sub, fhirUser: c["fhirUser"]?.stringValue, claims: c)
    }

    /// Whether `text` holds a C0 control character or DEL.
    static func holdsControl(_ text: String) -> Bool {
        text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }
}
