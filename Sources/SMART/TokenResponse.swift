import Foundation
import JSON

/// A token endpoint response as SMART App Launch defines it. Every member, including
/// unknown extension fields, is kept in `raw` (stored encrypted, never sent to a front end).
public struct TokenResponse: Sendable {
    public var accessToken: String
    public var tokenType: String
    /// Seconds the access token lives, when the EHR said.
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
        // No identifier or context value holds U+0000: PostgreSQL stores none (in text or jsonb).
        guard !holdsNUL(json) else { throw SMARTError(.tokenEndpoint, "token response holds a NUL character") }
        guard let access = json["access_token"]?.stringValue, !access.isEmpty else {
            throw SMARTError(.tokenEndpoint, "token response has no access_token")
        }
        guard let type = json["token_type"]?.stringValue, type.lowercased() == "bearer" else {
            throw SMARTError(.tokenEndpoint, "token response token_type is not Bearer")
        }
        var expiresIn: Int?
        if let e = json["expires_in"] {
            // Some servers send a string; accept digits only.
            if let n = e.intValue { expiresIn = n } else if let s = e.stringValue, let n = Int(s) { expiresIn = n } else {
                throw SMARTError(.tokenEndpoint, "token response expires_in is not a number")
            }
        }
        return TokenResponse(
            accessToken: access, tokenType: "Bearer", expiresIn: expiresIn, scope: json["scope"]?.stringValue,
            refreshToken: json["refresh_token"]?.stringValue, idToken: json["id_token"]?.stringValue,
            patient: json["patient"]?.stringValue, encounter: json["encounter"]?.stringValue,
            needPatientBanner: json["need_patient_banner"]?.boolValue, smartStyleURL: json["smart_style_url"]?.stringValue,
            intent: json["intent"]?.stringValue, tenant: json["tenant"]?.stringValue,
            fhirContext: json["fhirContext"], raw: json)
    }

    /// Whether any string of `value`, member names included, holds U+0000.
    private static func holdsNUL(_ value: JSONValue) -> Bool {
        switch value {
        case let .string(s): s.utf8.contains(0)
        case let .array(items): items.contains(where: holdsNUL)
        case let .object(members): members.contains { $0.0.utf8.contains(0) || holdsNUL($0.1) }
        case .null, .bool, .number: false
        }
    }
}
