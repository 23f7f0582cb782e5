import Cryptography
import Foundation
import HTTPCore
import JSON

/// How smart-bff authenticates to an EHR's token endpoint; the same for code exchange,
/// refresh and revocation.
public enum ClientAuthentication: Sendable {
    /// A public client: `client_id` in the form body.
    case none
    /// `client_secret_basic` (RFC 6749 §2.3.1).
    case secretBasic(secret: String)
    /// `private_key_jwt` (SMART Backend Services / RFC 7523) signed RS384 or ES384.
    case privateKeyJWT(key: ClientSigningKey, keyID: String)

    /// The form fields and headers that authenticate `clientID` to `tokenEndpoint`.
    func apply(clientID: String, tokenEndpoint: String, form: inout [(String, String)],
               headers: inout [(String, String)]) throws(SMARTError) {
        switch self {
        case .none:
            form.append(("client_id", clientID))
        case let .secretBasic(secret):
            // RFC 6749 §2.3.1: both parts form-urlencoded before base64.
            let pair = PercentEncoding.encode(clientID) + ":" + PercentEncoding.encode(secret)
            headers.append(("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()))
        case let .privateKeyJWT(key, keyID):
            form.append(("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"))
            form.append(("client_assertion", try ClientAuthentication.assertion(clientID: clientID, audience: tokenEndpoint,
                                                                                  key: key, keyID: keyID)))
        }
    }

    /// A client assertion: `iss` = `sub` = client id, `aud` = token URL, `exp` in 4 minutes,
    /// a unique `jti`. EHRs refuse an `exp` more than 5 minutes ahead of their own clock
    /// (Epic, SMART Backend Services): the minute between is room for ours to lead theirs.
    static func assertion(clientID: String, audience: String, key: ClientSigningKey, keyID: String,
                          now: Date = Date()) throws(SMARTError) -> String {
        let header: JSONValue = ["alg": .string(key.algorithm), "kid": .string(keyID), "typ": "JWT"]
        let issued = Int(now.timeIntervalSince1970)
        let claims: JSONValue = [
            "iss": .string(clientID), "sub": .string(clientID), "aud": .string(audience),
            "exp": .number(Double(issued + 240)), "iat": .number(Double(issued)),
            "jti": .string(SecureRandom.token(bytes: 16)),
        ]
        let input = Base64URL.encode(header.bytes) + "." + Base64URL.encode(claims.bytes)
        do {
            return input + "." + Base64URL.encode(try key.sign(Array(input.utf8)))
        } catch {
            throw SMARTError(.tokenEndpoint, "could not sign the client assertion")
        }
    }
}

/// What a PEM file holds instead of a usable `private_key_jwt` key, e.g. "an RSA key of
/// 1024 bits (RS384 needs 2048 or more)".
public struct ClientKeyError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// A private key for `private_key_jwt`: RSA (RS384) or EC P-384 (ES384).
public enum ClientSigningKey: Sendable {
    case rsa(RSAPrivateKey)
    case p384(P384PrivateKey)

    /// Reads a PEM private key of either kind. An RSA key needs at least 2048 bits (RFC 7518
    /// §3.3, for RS384).
    public init(pem: String) throws(ClientKeyError) {
        // PKCS#8 (`BEGIN ENCRYPTED PRIVATE KEY`) and traditional (`Proc-Type: 4,ENCRYPTED`).
        if pem.contains("ENCRYPTED") {
            throw ClientKeyError(description: "an encrypted private key (no pass phrase is asked for: store the key unencrypted, readable by smart-bff's user alone)")
        }
        if let key = try? RSAPrivateKey(pem: pem) {
            let bits = key.publicKey.modulusBits
            guard bits >= 2048 else { throw ClientKeyError(description: "an RSA key of \(bits) bits (RS384 needs 2048 or more)") }
            self = .rsa(key)
        } else if let key = try? P384PrivateKey(pem: pem) {
            self = .p384(key)
        } else {
            throw ClientKeyError(description: "no RSA or P-384 private key in PEM")
        }
    }

    public var algorithm: String {
        switch self { case .rsa: return "RS384"; case .p384: return "ES384" }
    }

    func sign(_ message: [UInt8]) throws -> [UInt8] {
        switch self {
        case let .rsa(key): return try key.signPKCS1SHA384(message)
        case let .p384(key): return try key.signES384(message)
        }
    }
}
