import Foundation
import HTTPCore

/// Decides where the browser may be sent after the callback: only to the BFF's own origin
/// (the default `return_to`, `/`, is there) and to origins and custom schemes on
/// `BFF_RETURN_ORIGINS`. Anything ambiguous is refused, not repaired.
public struct ReturnToPolicy: Sendable {
    public let publicURL: String
    /// Lower-case origins (`https://app.example`) and custom schemes (`myapp:`).
    public let allowed: [String]

    public init(publicURL: String, allowed: [String]) {
        self.publicURL = publicURL
        self.allowed = allowed
    }

    /// What a valid `return_to` is.
    public enum Target: Sendable, Equatable {
        /// An http(s) URL for a browser.
        case web(String)
        /// A custom-scheme URL for a mobile app (hand-off).
        case app(String)

        public var url: String {
            switch self { case let .web(u), let .app(u): return u }
        }
    }

    /// Resolves `returnTo` (default `/`) against the public URL and checks it; nil when refused.
    public func resolve(_ returnTo: String?) -> Target? {
        let text = returnTo ?? "/"
        guard !text.isEmpty, text.utf8.count <= 2048,
              text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }), !text.contains("\\") else { return nil }
        if text.hasPrefix("/") {
            // A path on the BFF's own origin; "//host" would be a network-path reference.
            guard !text.hasPrefix("//") else { return nil }
            let absolute = publicOrigin + text
            return isAllowedWeb(absolute) ? .web(absolute) : nil
        }
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let scheme = text[..<colon].lowercased()
        if scheme == "http" || scheme == "https" {
            return isAllowedWeb(text) ? .web(text) : nil
        }
        guard allowed.contains(scheme + ":"), BFFConfiguration.isCustomScheme(scheme + ":") else { return nil }
        guard let c = URLComponents(string: text), c.user == nil, c.password == nil else { return nil }
        return .app(text)
    }

    private var publicOrigin: String { Origin.of(publicURL) ?? publicURL }

    private func isAllowedWeb(_ url: String) -> Bool {
        guard let c = URLComponents(string: url), c.user == nil, c.password == nil, c.host != nil,
              let origin = Origin.of(url) else { return false }
        // The raw text must begin with the origin it parses to (no "@" or encoding tricks), its
        // scheme's default port written out or not.
        let written = c.port.map { origin.hasSuffix(":\($0)") ? origin : origin + ":\($0)" } ?? origin
        guard url.lowercased().hasPrefix(written), url.count == written.count || ["/", "?", "#"].contains(url[url.index(url.startIndex, offsetBy: written.count)])
        else { return false }
        // The BFF's own origin always: EHRs send no return_to, and a list naming only the
        // front end's origin must not refuse every EHR launch.
        return allowed.contains(origin) || origin == publicOrigin
    }
}
