import SMART

/// Checks a `/fhir/{path}?{query}` request before anything goes upstream. It refuses
/// rather than normalises: `..`, encoded slashes, dots or backslashes, `//`, `@`, NUL and
/// other control bytes, absolute URLs and over-long queries are 400.
enum FHIRPath {
    static let maxPath = 2048
    static let maxQuery = 4096

    /// Why the path or query is refused, or nil when it is safe.
    static func problem(path: String, query: String?) -> String? {
        guard !path.isEmpty else { return "A FHIR path is required." }
        guard path.utf8.count <= maxPath else { return "The path is too long." }
        if let query, query.utf8.count > maxQuery { return "The query is too long." }
        // One pass over the bytes, segment by segment.
        var length = 0, dots = 0
        for byte in path.utf8 {
            if byte == UInt8(ascii: "/") {
                if let problem = segmentProblem(length: length, dots: dots) { return problem }
                (length, dots) = (0, 0)
                continue
            }
            guard isSegmentByte(byte) else { return "The path holds characters a FHIR path does not." }
            length += 1
            if byte == UInt8(ascii: ".") { dots += 1 }
        }
        if let problem = segmentProblem(length: length, dots: dots) { return problem }
        if let query {
            guard query.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) else { return "The query holds control or non-ASCII bytes." }
            guard !containsEncoded(query, ["%00", "%0a", "%0d"]) else { return "The query holds encoded control bytes." }
        }
        return nil
    }

    /// Why a segment of `length` bytes, `dots` of them dots, is refused.
    private static func segmentProblem(length: Int, dots: Int) -> String? {
        if length == 0 { return "Empty path segments (//) are not allowed." }
        if length <= 2 && dots == length { return "Dot segments are not allowed." }
        return nil
    }

    /// Letters, digits and `-._$:` (FHIR types, ids, `$operations`, `_history`). No `%`, so
    /// no encoded slash, dot or backslash can reach the EHR; no `@`, `\` or `:` tricks
    /// matter because the target is always `{iss}/` + path.
    static func isSegmentByte(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "$"): return true
        default: return false
        }
    }

    static func containsEncoded(_ s: String, _ needles: [String]) -> Bool {
        let lower = s.lowercased()
        return needles.contains { lower.contains($0) }
    }

    /// What a path asks of the launch's scopes.
    enum Access: Equatable {
        /// Nothing: the server's `metadata` (its CapabilityStatement, public by the spec).
        case open
        /// `interaction` on resources of `type`; `"*"` when the results are not of one type
        /// (operations, system history, paths of no known shape), which only a
        /// wildcard scope (`patient/*.rs`, `user/*.read`) grants.
        case resources(type: String, interaction: SMARTScopes.Interaction)
    }

    /// The FHIR interaction a path makes, by the shapes of the REST API: `T` and `T/_history`
    /// search T; `T/id`, `T/id/_history` and `T/id/_history/vid` read T; the compartment
    /// search `T/id/U` searches U (its results are Us). For paths `problem` accepted (no empty
    /// segments).
    static func access(_ path: String) -> Access {
        let segments = path.split(separator: "/", maxSplits: 4, omittingEmptySubsequences: false)
        guard let type = segments.first, isResourceType(type) else {
            return segments.count == 1 && segments[0] == "metadata" ? .open : .resources(type: "*", interaction: .search)
        }
        let anyType = Access.resources(type: "*", interaction: .search)
        switch segments.count {
        case 1:
            return .resources(type: String(type), interaction: .search)
        case 2:
            if segments[1] == "_history" { return .resources(type: String(type), interaction: .search) }
            return isID(segments[1]) ? .resources(type: String(type), interaction: .read) : anyType
        case 3, 4:
            guard isID(segments[1]) else { return anyType }
            if segments[2] == "_history" { return .resources(type: String(type), interaction: .read) }
            if segments.count == 3 && isResourceType(segments[2]) { return .resources(type: String(segments[2]), interaction: .search) }
            return anyType
        default:
            return anyType
        }
    }

    /// A resource type's name: a capital letter, then letters and digits.
    private static func isResourceType(_ segment: Substring) -> Bool {
        guard let first = segment.utf8.first, first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z") else { return false }
        return segment.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) }
    }

    /// A resource id (FHIR: letters, digits, `-` and `.`), which no `_history` or `$operation` is.
    private static func isID(_ segment: Substring) -> Bool {
        segment.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
    }
}
