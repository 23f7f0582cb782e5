import HTTPCore
import JSON
import SMART

/// Parses `BFF_ISSUERS_FILE`: a JSON array of registrations (see CONTRACT.md).
enum IssuersFile {
    struct Problem: Error { let message: String }

    static func parse(_ bytes: [UInt8], readKey: (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) })
        throws -> [IssuerRegistration] {
        let json: JSONValue
        do { json = try JSONParser.parse(bytes) } catch { throw Problem(message: "not valid JSON (\(error.description))") }
        guard let items = json.arrayValue, !items.isEmpty else { throw Problem(message: "expected a non-empty JSON array of registrations") }
        var result: [IssuerRegistration] = []
        var seen = Set<String>()
        var keysByID: [String: String] = [:] // private_key_id → the PEM it names
        for (index, item) in items.enumerated() {
            let at = "entry \(index)"
            guard let members = item.objectValue else { throw Problem(message: "\(at): expected an object") }
            // A misspelt member would be ignored: "client_secert" makes a public client, "scopes" asks for the default scopes.
            for (name, _) in members where !knownMembers.contains(name) {
                let hint = BFFConfiguration.closest(to: name, among: knownMembers).map { "; did you mean \"\($0)\"?" } ?? ""
                throw Problem(message: "\(at): unknown member \"\(name)\"\(hint)")
            }
            guard let iss = item["iss"]?.stringValue, Origin.of(iss) != nil else {
                throw Problem(message: "\(at): \"iss\" must be an absolute http(s) URL")
            }
            // A FHIR base: `{iss}/metadata` and `{iss}/{path}` are appended to it.
            guard let parts = URLComponents(string: iss), parts.fragment == nil, parts.query == nil else {
                throw Problem(message: "\(at): \"iss\" is a FHIR base URL, with no query or fragment")
            }
            // Discovery, the JWKS and bearer tokens go to this URL: never in cleartext off this machine.
            guard URLPolicy.isUsableEndpoint(iss) else {
                throw Problem(message: "\(at): \"iss\" \(iss) is cleartext http to a host that is not loopback; use https (http only for localhost, 127.0.0.0/8 or ::1)")
            }
            guard let clientID = item["client_id"]?.stringValue, !isBlank(clientID) else {
                throw Problem(message: "\(at): \"client_id\" is required")
            }
            var registration = IssuerRegistration(iss: iss, clientID: clientID)
            // Blank is a mistake, never a choice: an empty secret would make a confidential
            // client of a public one, an empty scope a sign-in without openid (no ID token).
            if let secret = try nonBlankString(item, "client_secret", at) { registration.clientSecret = Secret(secret) }
            if let scope = try nonBlankString(item, "scope", at) { registration.scope = scope }
            if let scope = try nonBlankString(item, "standalone_scope", at) { registration.standaloneScope = scope }
            if let issuer = try string(item, "id_token_issuer", at) {
                // OpenID Connect: an https URL (http here only on loopback, for development)
                // with no query or fragment, compared with `iss` exactly as written.
                guard URLPolicy.isUsableEndpoint(issuer), let parts = URLComponents(string: issuer), parts.query == nil, parts.fragment == nil else {
                    throw Problem(message: "\(at): \"id_token_issuer\" must be an https URL with no query or fragment")
                }
                registration.idTokenIssuer = issuer
            }
            if let keyFile = try string(item, "private_key_file", at) {
                // One way to authenticate at the token endpoint: which was meant is not for the BFF to guess.
                guard registration.clientSecret == nil else {
                    throw Problem(message: "\(at): \"client_secret\" and \"private_key_file\" are two ways to authenticate; give one")
                }
                guard let kid = try string(item, "private_key_id", at), !kid.isEmpty else {
                    throw Problem(message: "\(at): \"private_key_id\" is required with \"private_key_file\"")
                }
                let pem: String
                do { pem = try readKey(keyFile) } catch { throw Problem(message: "\(at): cannot read private_key_file \(keyFile)") }
                // Read now, so that a key no login could sign with stops the start, by name.
                do { _ = try ClientSigningKey(pem: pem) } catch {
                    throw Problem(message: "\(at): private_key_file \(keyFile) holds \(error.description)")
                }
                // One kid, one key in /.well-known/jwks.json: an EHR looks keys up by kid.
                if let other = keysByID[kid], other != pem {
                    throw Problem(message: "\(at): \"private_key_id\" \(kid) names another key already (each key needs a kid of its own)")
                }
                keysByID[kid] = pem
                registration.privateKeyPEM = Secret(pem)
                registration.privateKeyID = kid
            }
            if registration.privateKeyID == nil, try string(item, "private_key_id", at) != nil {
                throw Problem(message: "\(at): \"private_key_id\" names the key of \"private_key_file\", which is missing")
            }
            // The same EHR however its URL is spelt (host case, default port): two registrations
            // would name each other's issuer in discovery, and every sign-in would fail.
            guard seen.insert(sameEHRKey(registration.iss)).inserted else {
                throw Problem(message: "\(at): \"\(iss)\" is registered twice")
            }
            result.append(registration)
        }
        return result
    }

    /// The members an entry may have (CONTRACT.md, and `id_token_issuer`).
    static let knownMembers = ["iss", "client_id", "client_secret", "scope", "standalone_scope", "id_token_issuer",
                               "private_key_file", "private_key_id"]

    /// `iss` as a comparable key: its origin (lower case, no default port) and its path.
    private static func sameEHRKey(_ iss: String) -> String {
        let path = URLComponents(string: iss)?.percentEncodedPath ?? iss
        return (Origin.of(iss) ?? iss) + IssuerRegistration.normalize(path)
    }

    private static func isBlank(_ text: String) -> Bool { text.allSatisfy(\.isWhitespace) }

    /// ``string(_:_:_:)``, refusing an empty or all-blank value.
    private static func nonBlankString(_ item: JSONValue, _ name: String, _ at: String) throws -> String? {
        guard let text = try string(item, name, at) else { return nil }
        guard !isBlank(text) else { throw Problem(message: "\(at): \"\(name)\" is blank; leave it out, or give a value") }
        return text
    }

    /// The string member `name` of an entry; nil when absent or null. Any other type is
    /// refused rather than ignored (a `"client_secret": 123` would make a public client).
    private static func string(_ item: JSONValue, _ name: String, _ at: String) throws -> String? {
        guard let value = item[name], value != .null else { return nil }
        guard let text = value.stringValue else { throw Problem(message: "\(at): \"\(name)\" must be a string") }
        return text
    }
}

import Foundation
