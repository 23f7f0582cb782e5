import Foundation

/// Origins (RFC 6454 §4) of absolute http(s) URLs, for comparing where URLs lead.
public enum Origin {
    /// `scheme://host[:port]` in lower case, without the scheme's default port (an origin
    /// compares equal however its port is written), or nil when `url` is not absolute
    /// http(s) or carries user info.
    public static func of(_ url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host?.lowercased(), !host.isEmpty,
              components.user == nil, components.password == nil else { return nil }
        let isDefault = (scheme == "http" && components.port == 80) || (scheme == "https" && components.port == 443)
        let port = components.port.flatMap { isDefault ? nil : ":\($0)" } ?? ""
        return "\(scheme)://\(host)\(port)"
    }
}
