import JSON

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
        for (index, item) in items.enumerated() {
            let at = "entry \(index)"
            guard item.objectValue != nil else { throw Problem(message: "\(at): expected an object") }
            guard let iss = item["iss"]?.stringValue, let origin = BFFConfiguration.origin(of: iss) else {
                throw Problem(message: "\(at): \"iss\" must be an absolute http(s) URL")
            }
            _ = origin
            guard let clientID = item["client_id"]?.stringValue, !clientID.isEmpty else {
                throw Problem(message: "\(at): \"client_id\" is required")
            }
            var registration = IssuerRegistration(iss: iss, clientID: clientID)
            if let secret = item["client_secret"]?.stringValue { registration.clientSecret = Secret(secret) }
            if let scope = item["scope"]?.stringValue { registration.scope = scope }
            if let scope = item["standalone_scope"]?.stringValue { registration.standaloneScope = scope }
            if let keyFile = item["private_key_file"]?.stringValue {
                guard let kid = item["private_key_id"]?.stringValue, !kid.isEmpty else {
                    throw Problem(message: "\(at): \"private_key_id\" is required with \"private_key_file\"")
                }
                do { registration.privateKeyPEM = Secret(try readKey(keyFile)) } catch {
                    throw Problem(message: "\(at): cannot read private_key_file \(keyFile)")
                }
                registration.privateKeyID = kid
            }
            guard seen.insert(registration.iss).inserted else { throw Problem(message: "\(at): \"\(iss)\" is registered twice") }
            result.append(registration)
        }
        return result
    }
}

import Foundation
