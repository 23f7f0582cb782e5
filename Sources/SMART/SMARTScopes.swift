/// Granted SMART resource scopes, v1 (`patient/Observation.read`) and v2
/// (`patient/Observation.rs?category=…`), for checking a FHIR read before it is sent.
/// The EHR still decides; this is defence in depth.
public struct SMARTScopes: Sendable, Equatable {
    public enum Interaction: Sendable { case read, search }

    struct Grant: Sendable, Equatable {
        let resourceType: String // "*" for all
        let read: Bool
        let search: Bool
        /// v2 query restrictions, e.g. ["category": "http://…|laboratory"].
        let restrictions: [String: String]
    }

    let grants: [Grant]

    /// Parses a space-separated scope string; scopes that are not resource scopes
    /// (`openid`, `launch`, `offline_access`, …) are ignored.
    public init(_ scope: String) {
        grants = scope.split(separator: " ").compactMap { SMARTScopes.parse(String($0)) }
    }

    static func parse(_ scope: String) -> Grant? {
        guard let slash = scope.firstIndex(of: "/") else { return nil }
        let context = scope[..<slash]
        guard context == "patient" || context == "user" || context == "system" else { return nil }
        var rest = scope[scope.index(after: slash)...]
        var restrictions: [String: String] = [:]
        if let q = rest.firstIndex(of: "?") {
            for pair in rest[rest.index(after: q)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2, let name = PercentDecoding.decode(parts[0]), let value = PercentDecoding.decode(parts[1])
                else { return nil }
                restrictions[name] = value
            }
            rest = rest[..<q]
        }
        guard let dot = rest.lastIndex(of: ".") else { return nil }
        let type = String(rest[..<dot])
        let permission = String(rest[rest.index(after: dot)...])
        guard !type.isEmpty else { return nil }
        switch permission {
        case "read", "*": return Grant(resourceType: type, read: true, search: true, restrictions: restrictions)
        case "write": return nil
        default:
            // v2: a subset of "cruds" in that order.
            guard !permission.isEmpty, isOrderedSubset(permission, of: "cruds") else { return nil }
            return Grant(resourceType: type, read: permission.contains("r"), search: permission.contains("s"),
                         restrictions: restrictions)
        }
    }

    static func isOrderedSubset(_ letters: String, of all: String) -> Bool {
        var it = all.makeIterator()
        outer: for c in letters {
            while let a = it.next() { if a == c { continue outer } }
            return false
        }
        return true
    }

    /// Whether `interaction` on `resourceType` is granted. For searches, v2 restrictions
    /// must be met by the query (`category=code` or `category=system|code`).
    public func allows(_ resourceType: String, _ interaction: Interaction, query: [(name: String, value: String)] = []) -> Bool {
        grants.contains { grant in
            guard grant.resourceType == "*" || grant.resourceType == resourceType else { return false }
            switch interaction {
            case .read:
                return grant.read
            case .search:
                guard grant.search else { return false }
                return grant.restrictions.allSatisfy { name, required in
                    let values = query.filter { $0.name == name }.flatMap { $0.value.split(separator: ",").map(String.init) }
                    return !values.isEmpty && values.allSatisfy { SMARTScopes.matches($0, required) }
                }
            }
        }
    }

    static func matches(_ given: String, _ required: String) -> Bool {
        if given == required { return true }
        if let bar = required.lastIndex(of: "|"), !given.contains("|") { return given == required[required.index(after: bar)...] }
        return false
    }
}

/// Percent-decoding without `+` as space (scope strings are not form-encoded).
enum PercentDecoding {
    static func decode<S: StringProtocol>(_ s: S) -> String? {
        var out: [UInt8] = []
        var it = s.utf8.makeIterator()
        while let c = it.next() {
            if c == UInt8(ascii: "%") {
                guard let h = it.next(), let l = it.next(), let v = UInt8(String(decoding: [h, l], as: UTF8.self), radix: 16) else { return nil }
                out.append(v)
            } else {
                out.append(c)
            }
        }
        return String(validating: out, as: UTF8.self)
    }
}
