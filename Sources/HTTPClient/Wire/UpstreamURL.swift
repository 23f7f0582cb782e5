#if canImport(Glibc)
import Glibc
#endif
import HTTPCore

/// An `http` or `https` URL taken apart for one request: where the connection goes (scheme,
/// host, port) and what the request line carries (the target, path and query as given).
///
/// Strict: no user information, a host of letters, digits, `-`, `.` and `_` (or an IP
/// address, IPv6 in brackets), a port of 1 to 65535, and a target of visible ASCII only.
/// Anything else is refused before a connection is made; the fragment is dropped.
struct UpstreamURL: Sendable, Equatable {
    let isSecure: Bool
    /// Lowercased host name, dotted IPv4 address, or IPv6 address without brackets.
    let host: String
    let port: Int
    /// The request target in origin form: the path ("/" at least) and the query.
    let target: String
    /// The host is an IP address (no name to resolve, no SNI).
    let isIPAddress: Bool

    /// The `Host` field's value: the host (IPv6 in brackets), with the port unless it is the
    /// scheme's default.
    var authority: String {
        let name = isIPv6 ? "[\(host)]" : host
        return port == (isSecure ? 443 : 80) ? name : "\(name):\(port)"
    }

    /// `host:port` (IPv6 in brackets), as a CONNECT request names its target.
    var hostAndPort: String { (isIPv6 ? "[\(host)]" : host) + ":\(port)" }

    private var isIPv6: Bool { host.utf8.contains(UInt8(ascii: ":")) }

    /// The target in absolute form, as a request through a plain-http proxy carries it.
    var absoluteTarget: String { (isSecure ? "https://" : "http://") + authority + target }

    init(_ text: String) throws(HTTPClientError) {
        var rest = Substring(text)
        if rest.utf8.count >= 8, String(rest.prefix(8)).equalsIgnoringASCIICase("https://") {
            isSecure = true
            rest = rest.dropFirst(8)
        } else if rest.utf8.count >= 7, String(rest.prefix(7)).equalsIgnoringASCIICase("http://") {
            isSecure = false
            rest = rest.dropFirst(7)
        } else {
            throw .invalidRequest("only http and https URLs are supported")
        }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        (host, port, isIPAddress) = try Self.parseAuthority(rest[..<authorityEnd], isSecure: isSecure)
        var target = rest[authorityEnd...]
        if let fragment = target.firstIndex(of: "#") { target = target[..<fragment] }
        guard target.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            throw .invalidRequest("the URL holds spaces, control characters or non-ASCII bytes")
        }
        self.target = target.first == "/" ? String(target) : "/" + target
    }

    private static func parseAuthority(_ authority: Substring, isSecure: Bool) throws(HTTPClientError) -> (String, Int, Bool) {
        guard !authority.utf8.contains(UInt8(ascii: "@")) else { throw .invalidRequest("user information in URLs is not supported") }
        var hostPart = authority
        var portPart: Substring?
        if authority.first == "[" {
            guard let close = authority.firstIndex(of: "]") else { throw .invalidRequest("the URL's IPv6 address is not closed") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":" else { throw .invalidRequest("the URL's authority is malformed") }
                portPart = after.dropFirst()
            }
            guard isAddress(hostPart, family: AF_INET6) else { throw .invalidRequest("the URL's IPv6 address is malformed") }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        }
        var port = isSecure ? 443 : 80
        if let portPart {
            guard !portPart.isEmpty, portPart.utf8.count <= 5, portPart.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let number = Int(portPart), (1...65535).contains(number) else {
                throw .invalidRequest("the URL's port is not a number from 1 to 65535")
            }
            port = number
        }
        guard !hostPart.isEmpty else { throw .invalidRequest("the URL has no host") }
        if authority.first == "[" { return (String(hostPart).lowercased(), port, true) }
        guard hostPart.utf8.allSatisfy(isHostNameByte) else { throw .invalidRequest("the URL's host name holds characters a host name cannot") }
        let lowercased = hostPart.utf8.contains { $0 >= 0x41 && $0 <= 0x5A } ? hostPart.lowercased() : String(hostPart)
        return (lowercased, port, isAddress(hostPart, family: AF_INET))
    }

    private static func isHostNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }

    private static func isAddress(_ text: Substring, family: Int32) -> Bool {
        var buffer = in6_addr() // large enough for either family
        return String(text).withCString { inet_pton(family, $0, &buffer) } == 1
    }
}
