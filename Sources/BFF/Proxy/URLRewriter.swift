#if canImport(Glibc)
import Glibc
#endif

/// Rewrites `"<EHR base>/` to `"<BFF public URL>/fhir/` in a JSON byte stream, across chunk
/// boundaries, so that Bundle `link[].url` and `entry[].fullUrl` page through the BFF.
/// A chunk without the pattern goes through without a copy.
struct URLRewriter {
    private let pattern: [UInt8]
    private let replacement: [UInt8]
    private var carry: [UInt8] = []

    init(from base: String, to replacementBase: String) {
        pattern = Array(("\"" + base + "/").utf8)
        replacement = Array(("\"" + replacementBase + "/").utf8)
    }

    /// Rewrites `chunk`; holds back a possible partial match at its end for the next call.
    mutating func rewrite(_ chunk: [UInt8]) -> [UInt8] {
        let input = carry.isEmpty ? chunk : carry + chunk
        let (matches, keep) = input.withUnsafeBytes { scan($0) }
        carry = keep < input.count ? Array(input[keep...]) : []
        if matches.isEmpty { return keep == input.count ? input : Array(input[..<keep]) }
        var out: [UInt8] = []
        out.reserveCapacity(keep + matches.count * max(0, replacement.count - pattern.count))
        var copied = 0
        for match in matches {
            out += input[copied..<match]
            out += replacement
            copied = match + pattern.count
        }
        out += input[copied..<keep]
        return out
    }

    /// Where the pattern starts in `bytes`, and how much of `bytes` can go out now (the rest
    /// may begin a match that the next chunk completes).
    private func scan(_ bytes: UnsafeRawBufferPointer) -> (matches: [Int], keep: Int) {
        guard let base = bytes.baseAddress, !pattern.isEmpty else { return ([], bytes.count) }
        let n = bytes.count, m = pattern.count, first = Int32(pattern[0])
        var matches: [Int] = []
        var i = 0
        while i < n, let hit = memchr(base + i, first, n - i) {
            let at = base.distance(to: UnsafeRawPointer(hit))
            let available = min(m, n - at)
            let equal = pattern.withUnsafeBytes { memcmp(base + at, $0.baseAddress!, available) == 0 }
            if equal && available == m {
                matches.append(at)
                i = at + m
            } else if equal {
                return (matches, at) // a partial match at the end
            } else {
                i = at + 1
            }
        }
        return (matches, n)
    }

    /// Rewrites a whole body (nothing before it, nothing after it); a body without the
    /// pattern comes back as it is.
    func rewrite(whole body: [UInt8]) -> [UInt8] {
        var rewriter = self
        rewriter.carry = []
        let out = rewriter.rewrite(body)
        return rewriter.carry.isEmpty ? out : out + rewriter.carry
    }

    /// Whatever was held back.
    mutating func finish() -> [UInt8] {
        defer { carry = [] }
        return carry
    }

    /// A single URL (a `Location` header).
    static func rewrite(url: String, from base: String, to replacementBase: String) -> String {
        url.hasPrefix(base + "/") ? replacementBase + url.dropFirst(base.count) : url
    }
}
