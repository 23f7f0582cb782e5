/// Rewrites `"<EHR base>/` to `"<BFF public URL>/fhir/` in a JSON byte stream, across chunk
/// boundaries, so that Bundle `link[].url` and `entry[].fullUrl` page through the BFF.
struct URLRewriter {
    private let pattern: [UInt8]
    private let replacement: [UInt8]
    private var carry: [UInt8] = []

    init(from base: String, to replacementBase: String) {
        pattern = Array(("\"" + base + "/").utf8)
        replacement = Array(("\"" + replacementBase + "/").utf8)
    }

    /// Rewrites `chunk`; holds back a possible partial match for the next call.
    mutating func rewrite(_ chunk: [UInt8]) -> [UInt8] {
        let input = carry + chunk
        var out: [UInt8] = []
        out.reserveCapacity(input.count)
        var i = 0
        let n = input.count, m = pattern.count
        while i < n {
            if input[i] == pattern[0] {
                if i + m <= n {
                    if input[i..<(i + m)].elementsEqual(pattern) {
                        out += replacement
                        i += m
                        continue
                    }
                } else if input[i..<n].elementsEqual(pattern[0..<(n - i)]) {
                    carry = Array(input[i..<n])
                    return out
                }
            }
            out.append(input[i])
            i += 1
        }
        carry = []
        return out
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
