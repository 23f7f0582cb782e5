import Foundation
import HTTPCore

/// The egress proxy each request goes through, chosen the way libcurl and most command-line
/// tools choose it:
/// - `Configuration.proxy` when set, else for http URLs `http_proxy` (lower case only: an
///   upper-case `HTTP_PROXY` can be set by a CGI request's `Proxy:` header) and for https
///   URLs `https_proxy` or `HTTPS_PROXY`; then `all_proxy` or `ALL_PROXY`;
/// - except hosts that `no_proxy` (or `NO_PROXY`) names: `*` for every host, or a
///   comma-separated list of names (which cover their subdomains; a leading dot is ignored),
///   addresses and address ranges (`10.0.0.0/8`, `fd00::/8`) that cover a URL's IP address;
/// - and never plain http to a loopback host (libcurl would proxy it; Go's client does not).
///
/// Only `http://` proxies are supported (`host:port` alone means the same); https URLs go
/// through a `CONNECT` tunnel, plain http URLs are sent to the proxy in absolute form. User
/// information in the proxy URL becomes `Proxy-Authorization: Basic`.
struct ProxySettings: Sendable {
    /// An HTTP proxy to connect to.
    struct Proxy: Sendable, Equatable {
        let host: String
        let port: Int
        let isIPAddress: Bool
        /// The `Proxy-Authorization` value, when the proxy URL had user information.
        let authorization: String?

        /// A key part that tells connections through different proxies apart.
        var key: String { "\(host):\(port)" }
    }

    private let configured: Result<Proxy, HTTPClientError>?
    private let forHTTP: Result<Proxy, HTTPClientError>?
    private let forHTTPS: Result<Proxy, HTTPClientError>?
    private let exemptAll: Bool
    private let exemptHosts: [String]

    /// Settings from `configured` (the client's configuration) and `environment`.
    init(configured: String?, environment: [String: String]) {
        func value(_ names: String...) -> String? {
            names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
        }
        self.configured = configured.map(ProxySettings.parse)
        forHTTP = value("http_proxy", "all_proxy", "ALL_PROXY").map(ProxySettings.parse)
        forHTTPS = value("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY").map(ProxySettings.parse)
        let exemptions = (value("no_proxy", "NO_PROXY") ?? "")
            .split { $0 == "," || $0 == " " }
            .map { entry -> String in
                var host = entry.lowercased()
                while host.hasPrefix(".") { host.removeFirst() }
                while host.hasSuffix(".") { host.removeLast() } // a fully qualified name's final dot, as libcurl drops it
                // [v6] and [v6]/bits, as libcurl takes them: the brackets go.
                if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
                    host = String(host[host.index(after: host.startIndex)..<close]) + String(host[host.index(after: close)...])
                }
                return host
            }
            .filter { !$0.isEmpty }
        exemptAll = exemptions.contains("*")
        exemptHosts = exemptions
    }

    /// The proxy for `url`, nil to connect directly; throws when the proxy setting that
    /// applies cannot be used.
    func proxy(for url: UpstreamURL) throws(HTTPClientError) -> Proxy? {
        guard let chosen = configured ?? (url.isSecure ? forHTTPS : forHTTP), !isExempt(url.host) else { return nil }
        // Plain http is allowed only to a loopback host, to stay on this machine: sent to a
        // proxy, its bearer tokens would cross the network in cleartext. (https through a
        // proxy is a tunnel the proxy cannot read, so it may go.)
        if !url.isSecure && ProxySettings.isLoopback(url.host) { return nil }
        return try chosen.get()
    }

    /// `localhost`, a name under it, or an address in 127.0.0.0/8 or `::1`.
    static func isLoopback(_ host: String) -> Bool {
        let name = (host.hasSuffix(".") ? String(host.dropLast()) : host).lowercased()
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        guard let bytes = addressBytes(name) else { return false }
        return bytes.count == 4 ? bytes[0] == 127 : bytes == [UInt8](repeating: 0, count: 15) + [1]
    }

    private func isExempt(_ name: String) -> Bool {
        let host = name.hasSuffix(".") ? String(name.dropLast()) : name
        return exemptAll || exemptHosts.contains { entry in
            host == entry || host.hasSuffix("." + entry) || ProxySettings.range(entry, covers: host)
        }
    }

    /// Whether `entry`, an address range in CIDR notation, covers the IP address `host`.
    private static func range(_ entry: String, covers host: String) -> Bool {
        let parts = entry.split(separator: "/", maxSplits: 1)
        guard parts.count == 2, let prefix = Int(parts[1]), let network = addressBytes(String(parts[0])),
              let address = addressBytes(host), network.count == address.count, (0...network.count * 8).contains(prefix) else {
            return false
        }
        for bit in 0..<prefix where (network[bit / 8] ^ address[bit / 8]) & UInt8(0x80 >> (bit % 8)) != 0 { return false }
        return true
    }

    /// The 4 or 16 bytes of an IPv4 or IPv6 address, or nil.
    private static func addressBytes(_ text: String) -> [UInt8]? {
        guard let address = SocketAddress.numeric(text, port: 0) else { return nil }
        return address.family == AF_INET ? Array(address.bytes[4..<8]) : Array(address.bytes[8..<24])
    }

    /// For the start-up log: where https and http requests go, without credentials
    /// ("https via proxy.internal:3128, http direct, 2 no_proxy entries").
    var summary: String {
        func route(_ setting: Result<Proxy, HTTPClientError>?) -> String {
            switch setting {
            case nil: "direct"
            case let .success(proxy)?: "via " + proxy.key
            case .failure?: "unusable proxy setting"
            }
        }
        var text = "https \(route(configured ?? forHTTPS)), http \(route(configured ?? forHTTP))"
        if exemptAll { text += ", no_proxy *" } else if !exemptHosts.isEmpty { text += ", \(exemptHosts.count) no_proxy entries" }
        return text
    }

    /// Why a proxy setting that applies cannot be used (every request it covers fails), if so.
    var problem: String? {
        for setting in [configured, forHTTPS, forHTTP] {
            if case let .failure(error)? = setting { return error.message }
        }
        return nil
    }

    /// `http://user:password@proxy.example:3128/` → the proxy; default port 1080.
    static func parse(_ text: String) -> Result<Proxy, HTTPClientError> {
        var rest = Substring(text.strippingOWS())
        if let scheme = rest.range(of: "://") {
            guard rest[..<scheme.lowerBound].lowercased() == "http" else {
                return .failure(.connectFailed("the proxy URL's scheme is not supported (only http:// proxies are)"))
            }
            rest = rest[scheme.upperBound...]
        }
        if let slash = rest.firstIndex(of: "/") {
            guard rest[slash...].allSatisfy({ $0 == "/" }) else { return .failure(.connectFailed("the proxy URL has a path")) }
            rest = rest[..<slash]
        }
        var authorization: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at].split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let user = PercentEncoding.decode(credentials[0]),
                  let password = credentials.count > 1 ? PercentEncoding.decode(credentials[1]) : "" else {
                return .failure(.connectFailed("the proxy URL's user information is malformed"))
            }
            authorization = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
            rest = rest[rest.index(after: at)...]
        }
        do {
            // The host and port rules of any URL; a proxy's default port is 1080.
            let hasPort = rest.hasPrefix("[") ? rest.contains("]:") : rest.contains(":")
            let url = try UpstreamURL("http://" + rest + (hasPort ? "" : ":1080"))
            return .success(Proxy(host: url.host, port: url.port, isIPAddress: url.isIPAddress, authorization: authorization))
        } catch {
            return .failure(.connectFailed("the proxy URL's host or port is malformed"))
        }
    }
}
