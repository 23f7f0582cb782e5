/// Granted SMART resource scopes, v1 (`patient/Observation.read`) and v2
/// (`patient/Observation.rs?category=…`), for checking a FHIR read before it is sent.
/// The EHR still decides; this is defence in depth.
public struct SMARTScopes: Sendable, Equatable {
    public enum Interaction: Sendable {
        /// One resource by id: a read, a vread, or that resource's history.
        case read
        /// A search on the type; v2 restrictions must be met by the query.
        case search
        /// The type's history (`T/_history`): every version of every resource of the type.
        /// It takes no search parameters (only `_count`, `_since`, `_at`, `_list`), so no
        /// query meets a v2 restriction: it needs search permission with none.
        case history
        /// An operation (`$everything`, `$export`, ...): its parameters are not search
        /// filters, so as with history no query meets a v2 restriction.
        case operation
        /// Resources a search brings in besides its matches (`_include`, `_revinclude`,
        /// `_contained`): read or search permission with no restriction, as a restriction
        /// filters the matches and not what they bring in.
        case include
        /// Resources of another type whose data a search's filters read (`_has`, chained
        /// parameters): search permission on that type with no restriction, as the query's
        /// restriction parameter applies to the matches and not to them.
        case filter
    }

    struct Grant: Sendable, Equatable {
        let resourceType: String // "*" for all
        let read: Bool
        let search: Bool
        /// v2 query restrictions, e.g. ["category": "http://…|laboratory"].
        let restrictions: [String: String]
    }

    /// A resource scope as written, for comparing grants (`narrowed`): its context
    /// (`patient`, `user`, `system`), type, permissions as v2 letters (v1 `read` is `rs`,
    /// `write` `cud`, `*` all five), and v2 restrictions.
    ///
    /// Two forms Epic grants are read too, so that the proxy does not refuse reads the EHR
    /// allowed: v1 permissions in any case (`user/RelatedPerson.Read`), and a scope with no
    /// context (`Patient.read Patient.search`, context ""), whose type must then be a FHIR
    /// type name and its permission one of those words, with no restriction; `search` is
    /// the search permission (`s`).
    struct WrittenScope: Equatable {
        let context: String
        let resourceType: String
        let letters: Set<Character>
        let restrictions: [String: String]

        init?(_ scope: String) {
            var rest: Substring
            if let slash = scope.firstIndex(of: "/") {
                context = String(scope[..<slash])
                guard ["patient", "user", "system"].contains(context) else { return nil }
                rest = scope[scope.index(after: slash)...]
            } else {
                context = ""
                rest = scope[...]
            }
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
            guard let dot = rest.lastIndex(of: "."), dot != rest.startIndex else { return nil }
            resourceType = String(rest[..<dot])
            let permission = String(rest[rest.index(after: dot)...])
            switch permission.lowercased() {
            case "read": letters = ["r", "s"]
            case "write": letters = ["c", "u", "d"]
            case "search": letters = ["s"]
            case "*": letters = ["c", "r", "u", "d", "s"]
            default:
                guard !context.isEmpty, !permission.isEmpty, SMARTScopes.isOrderedSubset(permission, of: "cruds") else { return nil }
                letters = Set(permission)
            }
            guard context != "" || (restrictions.isEmpty && SMARTScopes.isFHIRTypeName(resourceType[...])) else { return nil }
            self.restrictions = restrictions
        }

        /// Whether everything this allows, `other` allows: the same context (or `other` has
        /// none, as Epic writes a grant for its type in every context), its type or all, no
        /// permission it lacks, every restriction it has.
        func isWithin(_ other: WrittenScope) -> Bool {
            (context == other.context || other.context.isEmpty) && (other.resourceType == "*" || other.resourceType == resourceType)
                && letters.isSubset(of: other.letters) && other.restrictions.allSatisfy { restrictions[$0.key] == $0.value }
        }
    }

    let grants: [Grant]

    /// Parses a space-separated scope string; scopes that are not resource scopes
    /// (`openid`, `launch`, `offline_access`, …) are ignored.
    public init(_ scope: String) {
        grants = scope.split(separator: " ").compactMap { SMARTScopes.parse(String($0)) }
    }

    /// The grant of a resource scope as the proxy enforces it (reads and searches); nil for
    /// a scope that is not one. (`write` alone parses to a grant that allows neither.)
    static func parse(_ scope: String) -> Grant? {
        WrittenScope(scope).map {
            Grant(resourceType: $0.resourceType, read: $0.letters.contains("r"), search: $0.letters.contains("s"), restrictions: $0.restrictions)
        }
    }

    /// Whether `name` can be a FHIR resource type: an ASCII capital, then ASCII letters.
    static func isFHIRTypeName(_ name: Substring) -> Bool {
        guard let first = name.utf8.first, first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z") else { return false }
        return name.utf8.allSatisfy { ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) }
    }

    static func isOrderedSubset(_ letters: String, of all: String) -> Bool {
        var it = all.makeIterator()
        outer: for c in letters {
            while let a = it.next() { if a == c { continue outer } }
            return false
        }
        return true
    }

    /// Whether `interaction` on `resourceType` is granted; `resourceType` `"*"` (results of
    /// any type) only by a wildcard grant. For searches, v2 restrictions must be met by the
    /// query (`category=code` or `category=system|code`); type history, included resources
    /// and filters on other types need a grant with no restrictions (see `Interaction`).
    ///
    /// A read by id (read, vread, an instance's history) is allowed by a restricted grant:
    /// the BFF cannot know a single resource's category before reading it, so there the
    /// EHR enforces the restriction. A search can be checked because its query states the
    /// category; type history and included resources cannot (the query's category does
    /// not filter them), so a restricted grant does not allow them.
    public func allows(_ resourceType: String, _ interaction: Interaction, query: [(name: String, value: String)] = []) -> Bool {
        grants.contains { grant in
            guard grant.resourceType == "*" || grant.resourceType == resourceType else { return false }
            switch interaction {
            case .read:
                return grant.read
            case .history, .operation, .filter:
                return grant.search && grant.restrictions.isEmpty
            case .include:
                return (grant.read || grant.search) && grant.restrictions.isEmpty
            case .search:
                guard grant.search else { return false }
                return grant.restrictions.allSatisfy { name, required in
                    let values = query.filter { $0.name == name }.flatMap { $0.value.split(separator: ",").map(String.init) }
                    return !values.isEmpty && values.allSatisfy { SMARTScopes.matches($0, required) }
                }
            }
        }
    }

    /// The scopes of `granted` (a refresh's answer) that stay within `original` (the launch's):
    /// a refresh gives the same scope or less (RFC 6749 §6), never more. Each resource scope
    /// of either string that one of the other's covers (same context, or the other's has none;
    /// its type or all; no permission more; every restriction) is kept, so an EHR that writes the same
    /// grant another way (`patient/*.rs` for the launch's types) keeps the launch's scopes,
    /// and one that answers more keeps no more; another scope (`openid`, `launch`, …) is kept
    /// when both hold it. In `granted`'s order, then `original`'s, each once: a narrower
    /// answer is kept as the EHR wrote it.
    public static func narrowed(_ granted: String, within original: String) -> String {
        let originalScopes = original.split(separator: " ").map(String.init)
        let grantedScopes = granted.split(separator: " ").map(String.init)
        let originalWritten = originalScopes.compactMap(WrittenScope.init), grantedWritten = grantedScopes.compactMap(WrittenScope.init)
        var kept: [String] = []
        for scope in grantedScopes + originalScopes where !kept.contains(scope) {
            let within: Bool
            if let written = WrittenScope(scope) {
                let other = originalScopes.contains(scope) ? grantedWritten : originalWritten
                within = other.contains { written.isWithin($0) }
            } else {
                within = originalScopes.contains(scope) && grantedScopes.contains(scope)
            }
            if within { kept.append(scope) }
        }
        return kept.joined(separator: " ")
    }

    /// Whether any grant allows searching, of whatever type and with whatever restriction.
    public var allowsSomeSearch: Bool {
        grants.contains { $0.search }
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
