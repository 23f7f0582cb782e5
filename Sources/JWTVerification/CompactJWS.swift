import Cryptography
import JSON

/// A JWS in compact serialization (RFC 7515 §7.1), parsed strictly: at most 16 KiB, three
/// canonical base64url parts, header and payload JSON objects without duplicate members.
public struct CompactJWS: Sendable {
    /// The largest token accepted, in bytes (16 KiB); checked before anything is decoded.
    public static let maxLength = 16 * 1024

    /// The protected header (a JSON object).
    public let header: JSONValue
    /// The payload (a JSON object: the claims).
    public let payload: JSONValue
    /// ASCII(BASE64URL(header) || '.' || BASE64URL(payload)).
    public let signingInput: [UInt8]
    /// The decoded signature bytes.
    public let signature: [UInt8]

    /// Parses `token`; throws `.malformed` for anything that is not a strict compact JWS
    /// with JSON-object header and payload.
    public init(_ token: String) throws(JWTError) { try self.init(token, payloadMustBeJSON: true) }

    /// `payloadMustBeJSON: false` is for generic JWS test vectors only; every token
    /// smart-bff accepts carries a JSON object.
    init(_ token: String, payloadMustBeJSON: Bool) throws(JWTError) {
        guard token.utf8.count <= CompactJWS.maxLength else { throw .malformed("token longer than 16 KiB") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("not a compact JWS (three parts)") }
        guard !parts[0].isEmpty, !parts[1].isEmpty || !payloadMustBeJSON, !parts[2].isEmpty else { throw .malformed("empty JWS part") }
        guard let headerBytes = Base64URL.decode(String(parts[0])), let payloadBytes = Base64URL.decode(String(parts[1])),
              let signature = Base64URL.decode(String(parts[2])) else { throw .malformed("non-canonical base64url") }
        let header: JSONValue, payload: JSONValue
        do {
            header = try JSONParser.parse(headerBytes)
            payload = payloadMustBeJSON ? try JSONParser.parse(payloadBytes) : .object([])
        } catch {
            throw .malformed("invalid JSON (\(error.reason))")
        }
        guard header.objectValue != nil, payload.objectValue != nil else { throw .malformed("header and payload must be JSON objects") }
        self.header = header
        self.payload = payload
        self.signingInput = Array((parts[0] + "." + parts[1]).utf8)
        self.signature = signature
    }

    /// The header's `alg`, if it is a string.
    public var algorithm: String? { header["alg"]?.stringValue }
    /// The header's `kid`, if it is a string.
    public var keyID: String? { header["kid"]?.stringValue }
}
