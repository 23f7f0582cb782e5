import HTTPCore

/// Checks a `/fhir/{path}?{query}` request before anything goes upstream. It refuses
/// rather than normalises: `..`, encoded slashes, dots or backslashes, `//`, `@`, NUL and
/// other control bytes, absolute URLs and over-long queries are 400. An empty path (the
/// EHR's base itself) is accepted only for a page of search results (`pageParameters`).
enum FHIRPath {
    static let maxPath = 2048
    static let maxQuery = 4096

    /// The parameters of a page of search results read at the EHR's base, as HAPI FHIR
    /// writes its paging links (`{base}?_getpages=…&_getpagesoffset=20&_count=20&_bundletype=searchset`,
    /// with `_pageId`, `_format`, `_pretty`, `_include`, `_elements` as the search had them),
    /// by these names exactly (no percent-encoding). `_getpages` must be there, once, with a
    /// search id as the BFF bound it (`PageBinding`: tag, `.`, id); no parameter may repeat
    /// but `_include`; no other parameter may be there.
    /// (`_pageId`, which HAPI's named-page providers add, names a page within the search
    /// that `_getpages` names; it is not bound itself.)
    static let pageParameters: Set<String> = ["_getpages", "_getpagesoffset", "_pageId", "_count", "_format", "_pretty",
                                              "_bundletype", "_include", "_include:iterate", "_include:recurse",
                                              "_elements", "_elements:exclude"]

    /// Parameters only a page at the base may carry, by their decoded names: HAPI FHIR pages
    /// whatever the path when it sees them, and only at the base is the id bound to the launch.
    static let pageOnlyParameters: Set<String> = ["_getpages", "_pageId"]

    /// Why the path or query is refused, or nil when it is safe.
    static func problem(path: String, query: String?) -> String? {
        if path.isEmpty {
            guard let query, isPage(query) else {
                return "A FHIR path is required: at the EHR's base only a page of search results (?_getpages=…) is read."
            }
        }
        guard path.utf8.count <= maxPath else { return "The path is too long." }
        if let query, query.utf8.count > maxQuery { return "The query is too long." }
        if !path.isEmpty, let problem = pathProblem(path) { return problem }
        if let query {
            guard query.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) else { return "The query holds control or non-ASCII bytes." }
            guard !containsEncodedControl(query) else { return "The query holds encoded control bytes." }
            // What the scope check reads must be what the EHR gets: a `#` would end the query
            // sent upstream (the rest a fragment, dropped) while the check and the audit trail
            // read on; a pair that does not decode would be skipped by the check alone.
            guard !query.utf8.contains(UInt8(ascii: "#")) else { return "The query holds a #." }
            // At `;` too, as some servers split queries (see `FHIRProxy.scopeCheckedItems`): a
            // `_getpages` hidden behind one is refused as well.
            for pair in query.split(whereSeparator: { $0 == "&" || $0 == ";" }) {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = PercentEncoding.decodeFormComponent(parts[0]),
                      parts.count == 1 || PercentEncoding.decodeFormComponent(parts[1]) != nil
                else { return "The query holds percent-encoding that is not UTF-8." }
                if !path.isEmpty, name.utf8.first == UInt8(ascii: "_"), pageOnlyParameters.contains(name) {
                    return "A page of search results is read at /fhir?_getpages=… only, as the Bundle's links give it."
                }
            }
        }
        return nil
    }

    /// Why a non-empty path is refused: one pass over the bytes, segment by segment.
    private static func pathProblem(_ path: String) -> String? {
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
        return segmentProblem(length: length, dots: dots)
    }

    /// Whether a query on the EHR's base asks for a page of search results (`pageParameters`).
    /// No `;` (some servers split on it too) and no escaped `&`, `;` or `=`: every reader of
    /// the query sees the pairs seen here.
    private static func isPage(_ query: String) -> Bool {
        guard !query.utf8.contains(UInt8(ascii: ";")), !containsEncoded(query, ["%26", "%3b", "%3d"]) else { return false }
        var seen: Set<Substring> = []
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0]
            guard pageParameters.contains(String(name)), seen.insert(name).inserted || name.hasPrefix("_include") else { return false }
            if name == "_getpages" {
                guard parts.count == 2, isBoundSearchID(parts[1]) else { return false }
            }
        }
        return seen.contains("_getpages")
    }

    /// Whether `value` has the form of a search id as the BFF binds it: a tag, `.`, an id.
    private static func isBoundSearchID(_ value: Substring) -> Bool {
        let count = value.utf8.count
        return count > PageBinding.tagLength + 1 && count <= PageBinding.tagLength + 1 + PageBinding.maxIDLength
            && value.utf8.allSatisfy(PageBinding.isIDByte)
            && value.utf8[value.utf8.index(value.utf8.startIndex, offsetBy: PageBinding.tagLength)] == UInt8(ascii: ".")
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

    /// Whether `s` holds a percent-encoded control byte: `%00`–`%1F` or `%7F`, in any case.
    static func containsEncodedControl(_ s: String) -> Bool {
        let bytes = Array(s.utf8)
        var i = 0
        while i + 2 < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                let high = bytes[i + 1], low = bytes[i + 2] | 0x20 // ASCII letters to lower case
                let isHex = (low >= 0x30 && low <= 0x39) || (low >= 0x61 && low <= 0x66)
                if isHex && (high == UInt8(ascii: "0") || high == UInt8(ascii: "1")) { return true }
                if high == UInt8(ascii: "7") && low == UInt8(ascii: "f") { return true }
            }
            i += 1
        }
        return false
    }

    static func containsEncoded(_ s: String, _ needles: [String]) -> Bool {
        let lower = s.lowercased()
        return needles.contains { lower.contains($0) }
    }
}
