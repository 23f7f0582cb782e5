import Foundation

/// Which URLs smart-bff will contact or redirect to.
public enum URLPolicy {
    /// An absolute https URL, or http on a loopback host (development and the sandbox);
    /// no user info, no fragment.
    public static func isUsableEndpoint(_ url: String) -> Bool {
        guard let c = URLComponents(string: url), let scheme = c.scheme?.lowercased(), let host = c.host, !host.isEmpty,
              c.user == nil, c.password == nil, c.fragment == nil else { return false }
        if scheme == "https" { return true }
        return scheme == "http" && isLoopback(host)
    }

    public static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased()
        return h == "localhost" || h == "127.0.0.1" || h == "::1" || h == "[::1]" || h.hasPrefix("127.")
    }

    /// `url` with `items` appended to its query (percent-encoded).
    public static func appendingQuery(_ url: String, _ items: [(String, String)]) -> String {
        guard !items.isEmpty else { return url }
        var base = url
        var fragment = ""
        if let hash = base.firstIndex(of: "#") {
            fragment = String(base[hash...])
            base = String(base[..<hash])
        }
        let encoded = items.map { percentEncode($0.0) + "=" + percentEncode($0.1) }.joined(separator: "&")
        let separator = base.contains("?") ? (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&") : "?"
        return base + separator + encoded + fragment
    }

    /// Percent-encodes all but RFC 3986 unreserved characters.
    public static func percentEncode(_ text: String) -> String {
        var out = ""
        for b in text.utf8 {
            switch b {
            case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E: out.unicodeScalars.append(Unicode.Scalar(b))
            default: out += String(format: "%%%02X", b)
            }
        }
        return out
    }
}
