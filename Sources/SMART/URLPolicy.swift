import Foundation
import HTTPCore

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
        let encoded = PercentEncoding.formEncode(items)
        let separator = base.contains("?") ? (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&") : "?"
        return base + separator + encoded + fragment
    }

}
