#if canImport(Glibc)
import Glibc
#endif

/// Rewrites EHR URLs to the BFF's in a JSON byte stream, across chunk boundaries, so that a
/// Bundle's `link[].url` and `entry[].fullUrl` page through the BFF and absolute references
/// under the EHR's base can be followed through it.
///
/// What is rewritten: a JSON string that is the value of an object member named exactly
/// `url`, `fullUrl` or `reference` and begins with `<EHR base>/`; that prefix becomes
/// `<BFF public URL>/fhir/`, the rest of the string stays. HAPI FHIR's paging links, a
/// query on the base itself, `<EHR base>?_getpages=<id>…`, become
/// `<BFF public URL>/fhir?_getpages=<tag>.<id>…`, the tag binding the id to the launch
/// (`PageBinding`); other queries on the base are left as the EHR sent them, as is every
/// such link when the rewriter has no binding.
///
/// The EHR base matches in each of its spellings (`BaseURLPattern`): scheme and host in any
/// case (`HTTPS://EHR.Example.org/fhir/…`), an explicit default port (`:443` for https,
/// `:80` for http) the same as none, and JSON's escaped slash (`https:\/\/ehr.example.org\/fhir\/…`,
/// PHP's default). The path is compared byte for byte. A URL written with `\/` gets the BFF's
/// URL with every `/` escaped too (`https:\/\/bff.example\/fhir\/…`), so the string keeps one
/// style; other escapes (`\u002F`) are not matched.
///
/// Nothing else changes: strings in arrays (`meta.profile`), the values of other members
/// (an identifier's `system`, `valueUri`, …), keys, text in narrative (its quotes are
/// escaped), and a member whose key holds an escape. Apps that match identifier systems or
/// recognise extensions see them as the EHR sent them.
///
/// An extension's own `url` is a `url` member too, and is rewritten when it lies under the
/// EHR's base (as is a canonical resource's `url`). Telling it apart needs the name of the
/// array the object sits in, which may be any distance back: every body would have to be
/// parsed on the proxy's hot path. Extension definitions usually live under a canonical
/// base that is not the FHIR endpoint; one that is shows the BFF's URL in its `url`.
///
/// The member's name is found by looking back from the string's opening quote: optional
/// whitespace, `:`, optional whitespace, then the key in quotes, and before its opening
/// quote a byte that is not `\`. The look-back reaches at most `lookBehind` bytes (earlier
/// chunks included): a member whose key, colon and whitespace take more than that (some 50
/// bytes of whitespace) is not rewritten, which is the safe side.
///
/// The scan looks only at `"` (memchr); only a `"` followed by the scheme's first letter
/// (`h`, `H`) is examined further, and only a match has its member name looked for.
/// A chunk without a match goes through without a copy.
struct URLRewriter {
    /// How far back from a string's opening quote its member name is looked for: enough
    /// for `,"reference"` (12 bytes) and `:` with generous whitespace around it.
    static let lookBehind = LookBehindBuffer.capacity

    /// The members whose values are rewritten.
    private static let memberNames: [[UInt8]] = [Array("url".utf8), Array("fullUrl".utf8), Array("reference".utf8)]

    /// `_getpages=`, the parameter a paging link on the base begins with.
    private static let pagesParameter = Array("_getpages=".utf8)

    /// What a rewriter matches and writes, built once per launch and shared by its copies (a
    /// read takes one reference to it, not one to each of its arrays).
    private final class Patterns: Sendable {
        let base: BaseURLPattern
        /// Tags the search ids of paging links on the base (nil: they are not rewritten).
        let pages: PageBinding?
        /// `<BFF public URL>/fhir`, for a `Location`.
        let replacementBase: String
        /// `"<BFF public URL>/fhir/`, and the same with each `/` written `\/`; then the same
        /// ending in `?` in place of the last `/`.
        let replacement: [UInt8]
        let escapedReplacement: [UInt8]
        let queryReplacement: [UInt8]
        let escapedQueryReplacement: [UInt8]

        init(base: String, replacementBase: String, pages: PageBinding?) {
            self.base = BaseURLPattern(base)
            self.pages = pages
            self.replacementBase = replacementBase
            func escaped(_ bytes: [UInt8]) -> [UInt8] { bytes.flatMap { $0 == UInt8(ascii: "/") ? Array(#"\/"#.utf8) : [$0] } }
            replacement = Array(("\"" + replacementBase + "/").utf8)
            escapedReplacement = escaped(replacement)
            queryReplacement = Array(("\"" + replacementBase + "?").utf8)
            escapedQueryReplacement = escaped(queryReplacement)
        }
    }

    private let patterns: Patterns
    private var carry: [UInt8] = []
    /// The last bytes (at most `lookBehind`) before `carry`: where a member name begins when
    /// its value opens at the start of the next input.
    private var context = LookBehindBuffer()

    init(from base: String, to replacementBase: String, pages: PageBinding? = nil) {
        patterns = Patterns(base: base, replacementBase: replacementBase, pages: pages)
    }

    /// Rewrites `chunk`; holds back a possible partial match at its end for the next call.
    mutating func rewrite(_ chunk: [UInt8]) -> [UInt8] {
        let input = carry.isEmpty ? chunk : carry + chunk
        let (matches, keep) = input.withUnsafeBytes { bytes in context.withBytes { scan(bytes, context: $0) } }
        input.withUnsafeBytes { context.append(UnsafeRawBufferPointer(rebasing: $0[..<keep])) }
        carry = keep < input.count ? Array(input[keep...]) : []
        if matches.isEmpty { return keep == input.count ? input : Array(input[..<keep]) }
        var out: [UInt8] = []
        out.reserveCapacity(keep + matches.count * patterns.escapedReplacement.count)
        var copied = 0
        for match in matches {
            out += input[copied..<match.at]
            switch (match.escaped, match.query) {
            case (false, false): out += patterns.replacement
            case (true, false): out += patterns.escapedReplacement
            case (false, true): out += patterns.queryReplacement
            case (true, true): out += patterns.escapedQueryReplacement
            }
            if let tag = match.tag {
                out += URLRewriter.pagesParameter
                out += tag
                out.append(UInt8(ascii: "."))
            }
            copied = match.at + match.length
        }
        out += input[copied..<keep]
        return out
    }

    /// A match: `"` and the EHR base with its `/` (or `?`: `query`, then `_getpages=`, and
    /// `tag` is the id's) at `at`, `length` bytes.
    private struct Found {
        let at: Int
        var length: Int
        let escaped: Bool
        let query: Bool
        var tag: [UInt8]?
    }

    /// The matches in `bytes` that are rewritten members' values, and how much of `bytes` can
    /// go out now (the rest may begin a match that the next chunk completes). `context`
    /// holds the bytes just before `bytes`.
    private func scan(_ bytes: UnsafeRawBufferPointer, context: UnsafeRawBufferPointer) -> (matches: [Found], keep: Int) {
        guard let start = bytes.baseAddress else { return ([], bytes.count) }
        let n = bytes.count
        var matches: [Found] = []
        var i = 0
        while i < n, let hit = memchr(start + i, Int32(UInt8(ascii: "\"")), n - i) {
            let at = start.distance(to: UnsafeRawPointer(hit))
            i = at + 1
            // Most quotes open keys and values that cannot be the base: one byte tells.
            if i < n && BaseURLPattern.lowercased(bytes[i]) != patterns.base.first { continue }
            switch patterns.base.match(bytes, from: i, escapes: true) {
            case .none:
                continue
            case .partial:
                // Held back for the next chunk to complete, if it is a rewritten member's value.
                if URLRewriter.isRewrittenMember(bytes, quote: at, context: context) { return (matches, at) }
            case let .full(length, escaped, query):
                guard URLRewriter.isRewrittenMember(bytes, quote: at, context: context) else { continue }
                var found = Found(at: at, length: 1 + length, escaped: escaped, query: query)
                if !query {
                    // The whole string decides (`hasDotSegment`): held back until its closing
                    // quote is here, unless it is longer than any URL to rewrite.
                    guard let close = URLRewriter.closingQuote(bytes, from: at + found.length) else {
                        if n - at <= URLRewriter.maxHeldString { return (matches, at) }
                        continue
                    }
                    if URLRewriter.hasDotSegment(UnsafeRawBufferPointer(rebasing: bytes[(at + found.length)...close]), jsonEscaped: true) { continue }
                }
                if query {
                    // A page of search results, its id bound to the launch; any other query
                    // on the base stays the EHR's.
                    guard let pages = patterns.pages else { continue }
                    switch URLRewriter.pageID(bytes, from: at + found.length) {
                    case .none: continue
                    case .partial: return (matches, at)
                    case let .found(id): found.tag = pages.tag(for: bytes[id])
                    }
                    found.length += URLRewriter.pagesParameter.count
                }
                matches.append(found)
                i = at + found.length
            }
        }
        return (matches, n)
    }

    /// The longest string held back whole for its check: a URL longer than this is left as
    /// the EHR sent it.
    static let maxHeldString = 16 * 1024

    /// The index of the `"` that ends the JSON string whose contents begin at `start` (one
    /// not escaped by a `\`), if it is in `bytes`.
    private static func closingQuote(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        var i = start
        while i < bytes.count {
            switch bytes[i] {
            case UInt8(ascii: "\""): return i
            case UInt8(ascii: "\\"): i += 2 // the escaped byte, whatever it is
            default: i += 1
            }
        }
        return nil
    }

    private enum PageID {
        case none
        case partial
        case found(Range<Int>)
    }

    /// The search id of a paging link on the base, from `start` (just after the `?`):
    /// `_getpages=`, then the id (`PageBinding.isIDByte`, at most `maxIDLength` bytes), ended
    /// by `&` or by the string's closing quote.
    private static func pageID(_ bytes: UnsafeRawBufferPointer, from start: Int) -> PageID {
        let n = bytes.count
        var i = start
        for expected in pagesParameter {
            guard i < n else { return .partial }
            guard bytes[i] == expected else { return .none }
            i += 1
        }
        let idStart = i
        while i < n, PageBinding.isIDByte(bytes[i]) {
            i += 1
            if i - idStart > PageBinding.maxIDLength { return .none }
        }
        guard i < n else { return .partial }
        guard i > idStart, bytes[i] == UInt8(ascii: "&") || bytes[i] == UInt8(ascii: "\"") else { return .none }
        return .found(idStart..<i)
    }

    /// Whether the string opening at `bytes[quote]` is the value of a `url`, `fullUrl` or
    /// `reference` member: looking back, optional whitespace, `:`, optional whitespace, `"`,
    /// the name, `"` and a byte that is not `\` (which would escape that quote), all within
    /// `lookBehind` bytes of `bytes` and `context` (the bytes before `bytes`).
    ///
    /// In valid JSON an unescaped `"` right after `:` and whitespace opens a member's value,
    /// and an escaped one has `\` right before it, so a quote inside a string never passes.
    private static func isRewrittenMember(_ bytes: UnsafeRawBufferPointer, quote: Int, context: UnsafeRawBufferPointer) -> Bool {
        let lowest = max(quote - lookBehind, -context.count)
        func byte(_ j: Int) -> UInt8 { j >= 0 ? bytes[j] : context[context.count + j] }
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 }
        var j = quote - 1
        while j >= lowest, isSpace(byte(j)) { j -= 1 }
        guard j >= lowest, byte(j) == UInt8(ascii: ":") else { return false }
        j -= 1
        while j >= lowest, isSpace(byte(j)) { j -= 1 }
        guard j >= lowest, byte(j) == UInt8(ascii: "\"") else { return false }
        names: for name in memberNames {
            let open = j - name.count - 1 // the name's opening quote
            guard open - 1 >= lowest, byte(open) == UInt8(ascii: "\""), byte(open - 1) != UInt8(ascii: "\\") else { continue }
            for (k, expected) in name.enumerated() where byte(open + 1 + k) != expected { continue names }
            return true
        }
        return false
    }

    /// Rewrites a whole body (nothing before it, nothing after it); a body without a match
    /// comes back as it is.
    func rewrite(whole body: [UInt8]) -> [UInt8] {
        var rewriter = self
        rewriter.carry = []
        rewriter.context = LookBehindBuffer()
        let out = rewriter.rewrite(body)
        return rewriter.carry.isEmpty ? out : out + rewriter.carry
    }

    /// Whatever was held back.
    mutating func finish() -> [UInt8] {
        defer { carry = [] }
        return carry
    }

    /// A single URL (a `Location` header) under the EHR's base: the base in any of its
    /// spellings but JSON's escapes, followed by `/`, becomes `<BFF public URL>/fhir/`; nil
    /// for any other URL.
    func rewritten(url: String) -> String? {
        let bytes = Array(url.utf8)
        guard case let .full(length, _, false) = bytes.withUnsafeBytes({ patterns.base.match($0, from: 0, escapes: false) }),
              !URLRewriter.hasDotSegment(bytes[length...], jsonEscaped: false) else { return nil }
        return patterns.replacementBase + "/" + String(decoding: bytes[length...], as: UTF8.self)
    }

    /// Whether the path of `rest` (what follows the base's `/`, up to `?`, `#` or the end) has
    /// a dot segment: `.` or `..`, percent-encoded or not, between `/` or `\` (a browser reads
    /// `\` in an http URL as `/`). `<base>/../session` is under the base as text, and a
    /// browser resolves it to the BFF's `/session`: such a URL is not the EHR's resource and
    /// is not rewritten. In a JSON string (`jsonEscaped`) `\/` and `\\` are read as
    /// `/` and `\`, and any `\u` escape counts as a dot segment (the safe side). So does a
    /// tab, CR or LF, raw or escaped: a browser drops them from a URL before anything else,
    /// so `.<TAB>.` is `..` to it (and `%2<TAB>e` is `%2e`).
    static func hasDotSegment(_ rest: some Collection<UInt8>, jsonEscaped: Bool) -> Bool {
        var dots = 0, other = false // the current segment: its dots, and whether it has anything else
        var iterator = rest.makeIterator()
        var pending: [UInt8] = [] // a percent escape being read
        func endSegment() -> Bool {
            defer { (dots, other) = (0, false) }
            return !other && (dots == 1 || dots == 2)
        }
        while let next = iterator.next() {
            var byte = next
            if byte == 0x09 || byte == 0x0A || byte == 0x0D { return true }
            if jsonEscaped && byte == UInt8(ascii: "\\") {
                guard let escaped = iterator.next() else { break }
                switch escaped {
                case UInt8(ascii: "u"), UInt8(ascii: "t"), UInt8(ascii: "n"), UInt8(ascii: "r"): return true
                case UInt8(ascii: "/"), UInt8(ascii: "\\"): byte = escaped
                default: byte = UInt8(ascii: "x")
                }
            }
            if !pending.isEmpty {
                pending.append(byte)
                guard pending.count == 3 else { continue }
                if pending[1] == UInt8(ascii: "2") && pending[2] | 0x20 == UInt8(ascii: "e") { dots += 1 } else { other = true }
                pending = []
                continue
            }
            switch byte {
            case UInt8(ascii: "/"), UInt8(ascii: "\\"): if endSegment() { return true }
            case UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "\""): return endSegment()
            case UInt8(ascii: "."): dots += 1
            case UInt8(ascii: "%"): pending = [byte]
            default: other = true
            }
        }
        return pending.isEmpty && endSegment()
    }
}

/// The last `capacity` bytes of a stream, kept inline (a SIMD vector is a
/// fixed-size value type): remembering them costs no allocation per chunk.
private struct LookBehindBuffer {
    static let capacity = 64 // the size of `storage`
    private var storage = SIMD64<UInt8>()
    private var count = 0

    /// Appends `new`, keeping only the last `capacity` bytes.
    mutating func append(_ new: UnsafeRawBufferPointer) {
        let capacity = LookBehindBuffer.capacity, old = count
        let kept = min(old, capacity - min(new.count, capacity))
        let added = min(new.count, capacity)
        withUnsafeMutableBytes(of: &storage) { raw in
            guard let start = raw.baseAddress else { return }
            if kept > 0 && kept < old { memmove(start, start + (old - kept), kept) }
            if added > 0 { memcpy(start + kept, new.baseAddress! + (new.count - added), added) }
        }
        count = kept + added
    }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        withUnsafeBytes(of: storage) { body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
    }
}
