import HTTPCore

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
            // What the scope check reads must be what the EHR gets: a `#` would end the query
            // sent upstream (the rest a fragment, dropped) while the check and the audit trail
            // read on; a pair that does not decode would be skipped by the check alone.
            guard !query.utf8.contains(UInt8(ascii: "#")) else { return "The query holds a #." }
            guard query.split(separator: "&").allSatisfy(decodes) else { return "The query holds percent-encoding that is not UTF-8." }
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
        isLetterOrDigit(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "$")
    }

    /// ASCII letters and digits.
    static func isLetterOrDigit(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A)
    }

    /// Whether a query's `name=value` pair percent-decodes to UTF-8, as `Request.queryItems` reads it.
    private static func decodes(_ pair: Substring) -> Bool {
        pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).allSatisfy { PercentEncoding.decodeFormComponent($0) != nil }
    }

    static func containsEncoded(_ s: String, _ needles: [String]) -> Bool {
        let lower = s.lowercased()
        return needles.contains { lower.contains($0) }
    }
}
