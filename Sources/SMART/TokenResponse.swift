import Foundation
import JSON

/// A token endpoint response as SMART App Launch defines it. Every member, including
/// unknown extension fields, is kept in `raw` (stored encrypted, never sent to a front end).
public struct TokenResponse: Sendable {
    public var accessToken: String
    public var tokenType: String
    /// Seconds the access token lives, when the EHR said: 1 to `maxExpiresIn`.
    public var expiresIn: Int?
    public var scope: String?
    public var refreshToken: String?
    public var idToken: String?
    public var patient: String?
    public var encounter: String?
    public var needPatientBanner: Bool?
    public var smartStyleURL: String?
    public var intent: String?
    public var tenant: String?
    public var fhirContext: JSONValue?
    /// The whole response object.
    public var raw: JSONValue

    /// Parses and checks a successful token response (RFC 6749 §5.1, SMART App Launch 2.x).
    public static func parse(_ bytes: [UInt8]) throws(SMARTError) -> TokenResponse {
        let json: JSONValue
        do { json = try JSONParser.parse(bytes) } catch { throw SMARTError(.tokenEndpoint, "token response is not valid JSON") }
        guard json.objectValue != nil else { throw SMARTError(.tokenEndpoint, "token response is not a JSON object") }
        guard let access = json["access_token"]?.stringValue, !access.isEmpty else {
            throw SMARTError(.tokenEndpoint, "token response has no access_token")
        }
        guard isBearerToken(access) else {
            throw SMARTError(.tokenEndpoint, "token response access_token is not a bearer token (visible ASCII, at most \(maxTokenLength) bytes)")
        }
        guard let type = json["token_type"]?.stringValue, type.lowercased() == "bearer" else {
            throw SMARTError(.tokenEndpoint, "token response token_type is not Bearer")
        }
        let expiresIn = json["expires_in"].flatMap(seconds)
        return TokenResponse(
            accessToken: access, tokenType: "Bearer", expiresIn: expiresIn, scope: json["scope"]?.stringValue,
            // An empty refresh token is none: sent back, it could only be refused.
            refreshToken: json["refresh_token"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }, idToken: json["id_token"]?.stringValue,
            patient: json["patient"]?.stringValue, encounter: json["encounter"]?.stringValue,
            needPatientBanner: json["need_patient_banner"].flatMap(flag), smartStyleURL: json["smart_style_url"]?.stringValue,
            intent: json["intent"]?.stringValue, tenant: json["tenant"]?.stringValue,
            fhirContext: json["fhirContext"], raw: json)
    }

    /// The longest access token taken (bytes): it goes in every read's `Authorization` field.
    public static let maxTokenLength = 16_384

    /// Whether `token` can be sent as `Authorization: Bearer <token>`: visible ASCII (RFC
    /// 6750's b64token is stricter, but a server that issues `{GUID}` or `a:b` tokens takes
    /// them back), of a sane length. Spaces, control characters or non-ASCII would go upstream
    /// as they are, or fail every read.
    static func isBearerToken(_ token: String) -> Bool {
        let bytes = token.utf8
        return bytes.count <= maxTokenLength && bytes.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// The longest `expires_in` taken at its word: one year. A session lives far shorter
    /// (`BFF_SESSION_TTL`, at most 30 days), so a token said to live longer is simply held
    /// valid for a year. Unbounded, its expiry could be a date PostgreSQL cannot store
    /// (`to_timestamp` fails from about 9.2e12 seconds on): the sign-in would fail after
    /// its code was used up, and a refresh would roll back with its rotated refresh token.
    public static let maxExpiresIn = 31_536_000

    /// A boolean, or one written as a string (`"false"`: Epic's token responses have
    /// `need_patient_banner` so).
    private static func flag(_ value: JSONValue) -> Bool? {
        switch value {
        case let .bool(b): b
        case .string("true"): true
        case .string("false"): false
        default: nil
        }
    }

    /// `expires_in`: a whole number of seconds, at least 1, as a JSON number or (as some
    /// servers send it) a string of digits; more than `maxExpiresIn` counts as that. Anything
    /// else (zero or less, a fraction, text) is taken as no `expires_in`: the token's life is
    /// unknown, and it is refreshed once the EHR refuses it. Not an error: a refresh refused
    /// after the EHR has rotated the refresh token would lose the new one, and with it the
    /// session; and zero would have every read refresh.
    private static func seconds(_ value: JSONValue) -> Int? {
        let seconds: Double
        switch value {
        case let .number(n) where n.rounded() == n: seconds = n
        // Digits beyond Int's range are still a number of seconds, only a large one.
        case let .string(s) where isWholeNumber(s): seconds = Double(s) ?? .infinity
        default: return nil
        }
        guard seconds >= 1 else { return nil }
        return seconds >= Double(maxExpiresIn) ? maxExpiresIn : Int(seconds)
    }

    /// ASCII digits with an optional sign, as `Int(_:)` reads them, but of any length.
    private static func isWholeNumber(_ s: String) -> Bool {
        let digits = s.utf8.first == UInt8(ascii: "+") || s.utf8.first == UInt8(ascii: "-") ? s.utf8.dropFirst() : s.utf8[...]
        return !digits.isEmpty && digits.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// Whether any string of the response, member names included, holds U+0000, which
    /// PostgreSQL stores in no text or jsonb column (a sign-in keeps the launch context
    /// there; a refresh keeps only encrypted bytes).
    public var holdsNUL: Bool { TokenResponse.holdsNUL(raw) }

    private static func holdsNUL(_ value: JSONValue) -> Bool {
        switch value {
        case let .string(s): s.utf8.contains(0)
        case let .array(items): items.contains(where: holdsNUL)
        case let .object(members): members.contains { $0.0.utf8.contains(0) || holdsNUL($0.1) }
        case .null, .bool, .number: false
        }
    }
}
