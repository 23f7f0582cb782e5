/// The EHR's base URL as a byte pattern that also matches its other spellings: the scheme
/// and host in any case (`HTTPS://EHR.Example.org`), an explicit default port (`:443` for
/// https, `:80` for http) the same as none, and, where JSON's escapes are allowed, any `/`
/// written `\/`. The path is compared byte for byte. A match ends with the `/` after the base,
/// or with a `?` right after it: a query on the base itself, as in HAPI FHIR's paging links
/// (`{base}?_getpages=…`).
///
/// A base that is not an absolute URL (`scheme://authority…`) matches nothing.
struct BaseURLPattern: Sendable {
    enum Match: Equatable {
        /// Not the base.
        case none
        /// The bytes ran out before the pattern could tell.
        case partial
        /// The first `length` bytes spell the base and a `/` (or a `?`: `query`); `escaped`
        /// when a `/` among them was written `\/`.
        case full(length: Int, escaped: Bool, query: Bool)
    }

    /// The scheme, in lower case.
    private let scheme: [UInt8]
    /// The host, in lower case.
    private let host: [UInt8]
    /// The port's digits; empty for the scheme's default port.
    private let port: [UInt8]
    /// The scheme's default port (`443`, `80`), or empty when it has none known.
    private let defaultPort: [UInt8]
    /// Empty, or `/…` without a trailing `/`.
    private let path: [UInt8]
    /// The scheme's first byte, in lower case: what the byte opening a match must be.
    let first: UInt8

    init(_ base: String) {
        var text = Array(base.utf8)
        if text.last == Self.slash { text.removeLast() } // a trailing slash is ignored
        guard let separator = text.firstRange(of: Array("://".utf8)), separator.lowerBound > 0 else {
            (scheme, host, port, defaultPort, path, first) = ([], [], [], [], [], 0)
            return
        }
        let scheme = text[..<separator.lowerBound].map(Self.lowercased)
        let authorityEnd = text[separator.upperBound...].firstIndex(of: Self.slash) ?? text.endIndex
        let authority = text[separator.upperBound..<authorityEnd]
        // The port follows the last ':' (after the ']' of an IPv6 literal).
        let hostEnd = authority.lastIndex(of: Self.colon).flatMap { colon in
            authority[colon...].contains(UInt8(ascii: "]")) ? nil : colon
        } ?? authority.endIndex
        let defaultPort: [UInt8] = switch String(decoding: scheme, as: UTF8.self) {
        case "https": Array("443".utf8)
        case "http": Array("80".utf8)
        default: []
        }
        let port = hostEnd < authority.endIndex ? Array(authority[(hostEnd + 1)...]) : []
        self.scheme = scheme
        host = authority[..<hostEnd].map(Self.lowercased)
        self.port = port == defaultPort ? [] : port
        self.defaultPort = defaultPort
        path = Array(text[authorityEnd...])
        first = scheme[0]
    }

    /// Whether `bytes` from `start` on spell the base and a `/` or `?`. `escapes`: whether a
    /// `/` may be written `\/` (inside a JSON string).
    func match(_ bytes: UnsafeRawBufferPointer, from start: Int, escapes: Bool) -> Match {
        guard !scheme.isEmpty else { return .none }
        let n = bytes.count
        var i = start, escaped = false
        for expected in scheme {
            guard i < n else { return .partial }
            guard Self.lowercased(bytes[i]) == expected else { return .none }
            i += 1
        }
        guard i < n else { return .partial }
        guard bytes[i] == Self.colon else { return .none }
        i += 1
        for _ in 0..<2 {
            if let failed = Self.slash(bytes, &i, &escaped, escapes: escapes) { return failed }
        }
        for expected in host {
            guard i < n else { return .partial }
            guard Self.lowercased(bytes[i]) == expected else { return .none }
            i += 1
        }
        guard i < n else { return .partial }
        if bytes[i] == Self.colon {
            i += 1
            let digits = i
            while i < n, bytes[i] &- UInt8(ascii: "0") < 10 {
                i += 1
                if i - digits > 5 { return .none }
            }
            guard i < n else { return .partial }
            let given = UnsafeRawBufferPointer(rebasing: bytes[digits..<i])
            let same = port.isEmpty ? given.isEmpty || given.elementsEqual(defaultPort) : given.elementsEqual(port)
            guard same else { return .none }
        } else if !port.isEmpty {
            return .none
        }
        for expected in path {
            if expected == Self.slash {
                if let failed = Self.slash(bytes, &i, &escaped, escapes: escapes) { return failed }
                continue
            }
            guard i < n else { return .partial }
            guard bytes[i] == expected else { return .none }
            i += 1
        }
        if i < n, bytes[i] == Self.question { return .full(length: i + 1 - start, escaped: escaped, query: true) }
        if let failed = Self.slash(bytes, &i, &escaped, escapes: escapes) { return failed }
        return .full(length: i - start, escaped: escaped, query: false)
    }

    /// Steps over a `/` (or `\/` when `escapes`) at `i`; nil when it did, else why not.
    private static func slash(_ bytes: UnsafeRawBufferPointer, _ i: inout Int, _ escaped: inout Bool, escapes: Bool) -> Match? {
        guard i < bytes.count else { return .partial }
        if bytes[i] == slash {
            i += 1
            return nil
        }
        guard escapes, bytes[i] == backslash else { return Match.none }
        guard i + 1 < bytes.count else { return .partial }
        guard bytes[i + 1] == slash else { return Match.none }
        i += 2
        escaped = true
        return nil
    }

    /// ASCII letters to lower case; every other byte as it is.
    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
    }

    private static let slash = UInt8(ascii: "/")
    private static let backslash = UInt8(ascii: "\\")
    private static let colon = UInt8(ascii: ":")
    private static let question = UInt8(ascii: "?")
}
