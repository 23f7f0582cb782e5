import Cryptography
import JSON

/// The usable RSA signing keys of a JWKS document (RFC 7517 §5).
public struct JWKSet: Sendable {
    public let keys: [JWK]
    /// The RSA signing keys the document holds, usable or not (another `alg`, a weak
    /// modulus): a token without `kid` may pick a key only when there is one.
    let rsaSigningKeys: Int

    public init(keys: [JWK]) {
        self.keys = keys
        rsaSigningKeys = keys.count
    }

    /// Parses a JWKS strictly (the JSON parser refuses duplicate members). Keys that are not
    /// RS256 signing keys, or fail the key policy, are left out; the document itself must be
    /// an object with a `keys` array.
    public init(json bytes: [UInt8]) throws(JWTError) {
        let json: JSONValue
        do { json = try JSONParser.parse(bytes) } catch { throw .jwksUnavailable("JWKS is not valid JSON (\(error.reason))") }
        guard let items = json["keys"]?.arrayValue else { throw .jwksUnavailable("JWKS has no keys array") }
        var keys: [JWK] = []
        for item in items {
            if let key = try? JWK.parseRSASigningKey(item) { keys.append(key) }
        }
        self.keys = keys
        rsaSigningKeys = items.filter(JWK.isRSASigningKey).count
    }

    /// The JWKS document `{"keys": [...]}` for already encoded public JWKs.
    public static func document(_ jwks: [JSONValue]) -> JSONValue { ["keys": .array(jwks)] }

    /// The key for a token: the one key whose `kid` is the token's, or, for a token without
    /// `kid`, the key of a set that holds exactly one RSA signing key, usable.
    public func key(for kid: String?) throws(JWTError) -> RSAPublicKey {
        if let kid {
            let matches = keys.filter { $0.keyID == kid }
            guard matches.count == 1 else { throw .unknownKey(matches.isEmpty ? "unknown kid" : "ambiguous kid", kid: kid) }
            return matches[0].key
        }
        guard rsaSigningKeys == 1, keys.count == 1 else {
            throw .unknownKey("token has no kid and the JWKS has \(rsaSigningKeys) RSA signing keys, \(keys.count) of them usable", kid: nil)
        }
        return keys[0].key
    }
}
