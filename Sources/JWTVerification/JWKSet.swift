import Cryptography
import JSON

/// The usable RSA signing keys of a JWKS document (RFC 7517 §5).
public struct JWKSet: Sendable {
    public let keys: [JWK]
    /// The RSA signing keys the document holds, usable or not (another `alg`, a weak
    /// modulus): a token without `kid` may pick a key only when there is one.
    let rsaSigningKeys: Int
    /// How many RSA signing keys of the document, usable or not, carry each `kid` (its UTF-8
    /// bytes: Swift's `String` equality would make "K1" and "\u{212A}1" one): a `kid` that two
    /// carry names no one key, even when only one of them could verify. (Keys of another type
    /// or use may share a `kid`, RFC 7517 §4.5: they are never a token's key.)
    let entriesPerKeyID: [[UInt8]: Int]
    /// Why the unusable RSA signing keys with a `kid` were left out (for the error, and so
    /// the operator's log says "a 1024-bit key", not "unknown kid").
    let unusable: [[UInt8]: String]

    public init(keys: [JWK]) {
        self.keys = keys
        rsaSigningKeys = keys.count
        entriesPerKeyID = keys.reduce(into: [:]) { counts, key in key.keyID.map { counts[Array($0.utf8), default: 0] += 1 } }
        unusable = [:]
    }

    /// Parses a JWKS strictly (the JSON parser refuses duplicate members). Keys that are not
    /// RS256 signing keys, or fail the key policy, are left out; the document itself must be
    /// an object with a `keys` array.
    public init(json bytes: [UInt8]) throws(JWTError) {
        let json: JSONValue
        do { json = try JSONParser.parse(bytes) } catch { throw .jwksUnavailable("JWKS is not valid JSON (\(error.reason))") }
        guard let items = json["keys"]?.arrayValue else { throw .jwksUnavailable("JWKS has no keys array") }
        var keys: [JWK] = [], counts: [[UInt8]: Int] = [:], unusable: [[UInt8]: String] = [:]
        for item in items where JWK.isRSASigningKey(item) {
            let kid = item["kid"]?.stringValue.map { Array($0.utf8) }
            if let kid { counts[kid, default: 0] += 1 }
            do {
                if let key = try JWK.parseRSASigningKey(item) { keys.append(key) } else if let kid { unusable[kid] = "not an RS256 key" }
            } catch {
                if let kid { unusable[kid] = error.reason }
            }
        }
        self.keys = keys
        rsaSigningKeys = items.filter(JWK.isRSASigningKey).count
        entriesPerKeyID = counts
        self.unusable = unusable
    }

    /// The JWKS document `{"keys": [...]}` for already encoded public JWKs.
    public static func document(_ jwks: [JSONValue]) -> JSONValue { ["keys": .array(jwks)] }

    /// The key for a token: the one RSA signing key whose `kid` is the token's (compared byte
    /// for byte), usable; or, for a token without `kid`, the key of a set that holds exactly
    /// one RSA signing key, usable.
    public func key(for kid: String?) throws(JWTError) -> RSAPublicKey {
        if let kid {
            let bytes = Array(kid.utf8)
            let matches = keys.filter { $0.keyID.map { Array($0.utf8) == bytes } ?? false }
            let entries = entriesPerKeyID[bytes] ?? 0
            guard entries <= 1 else { throw .unknownKey("ambiguous kid: \(entries) RSA signing keys carry it", kid: kid) }
            if matches.count == 1 { return matches[0].key }
            if let reason = unusable[bytes] {
                throw .weakKey("the key with this kid is unusable: \(reason)", kid: kid)
            }
            throw .unknownKey("unknown kid", kid: kid)
        }
        guard rsaSigningKeys == 1, keys.count == 1 else {
            throw .unknownKey("token has no kid and the JWKS has \(rsaSigningKeys) RSA signing keys, \(keys.count) of them usable", kid: nil)
        }
        return keys[0].key
    }
}
