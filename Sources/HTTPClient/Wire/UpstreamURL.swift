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

    /// Appends `authority` to `out`, without making a string of it.
    func appendAuthority(to out: inout [UInt8]) {
        if isIPv6 {
            out.append(literal: "[")
            out.append(utf8: host)
            out.append(literal: "]")
        } else {
            out.append(utf8: host)
        }
        if port != (isSecure ? 443 : 80) {
            out.append(literal: ":")
            out.append(utf8: String(port))
        }
    }

    /// `host:port` (IPv6 in brackets), as a CONNECT request names its target.
    var hostAndPort: String { (isIPv6 ? "[\(host)]" : host) + ":\(port)" }

    private var isIPv6: Bool { host.utf8.contains(UInt8(ascii: ":")) }

    /// The target in absolute form, as a request through a plain-http proxy carries it.
    var absoluteTarget: String { (isSecure ? "https://" : "http://") + authority + target }

    init(_ text: String) throws(HTTPClientError) {
        var text = text
        let parsed = text.withUTF8 { bytes in Result { () throws(HTTPClientError) in try UpstreamURL.parse(bytes) } }
        (isSecure, host, port, isIPAddress, target) = try parsed.get()
    }

    /// Over the URL's bytes: the proxy's profile showed Character-wise Substring work here.
    private static func parse(_ url: UnsafeBufferPointer<UInt8>) throws(HTTPClientError) -> (Bool, String, Int, Bool, String) {
        let isSecure: Bool
        var i: Int
        if hasPrefix(url, "https://") {
            (isSecure, i) = (true, 8)
        } else if hasPrefix(url, "http://") {
            (isSecure, i) = (false, 7)
        } else {
            throw .invalidRequest("only http and https URLs are supported")
        }
        let authorityStart = i
        while i < url.count, url[i] != UInt8(ascii: "/"), url[i] != UInt8(ascii: "?"), url[i] != UInt8(ascii: "#") { i += 1 }
        let (host, port, isIPAddress) = try parseAuthority(UnsafeBufferPointer(rebasing: url[authorityStart..<i]), isSecure: isSecure)
        var end = i
        while end < url.count, url[end] != UInt8(ascii: "#") { end += 1 } // the fragment stays here
        let target = UnsafeBufferPointer(rebasing: url[i..<end])
        guard target.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            throw .invalidRequest("the URL holds spaces, control characters or non-ASCII bytes")
        }
        let path = String(decoding: target, as: UTF8.self)
        return (isSecure, host, port, isIPAddress, target.first == UInt8(ascii: "/") ? path : "/" + path)
    }

    /// Whether `bytes` start with `prefix`, ASCII letters in any case.
    private static func hasPrefix(_ bytes: UnsafeBufferPointer<UInt8>, _ prefix: StaticString) -> Bool {
        guard bytes.count >= prefix.utf8CodeUnitCount else { return false }
        let expected = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        return zip(bytes, expected).allSatisfy { $0 == $1 || ($0 | 0x20 == $1 && $1 >= 0x61 && $1 <= 0x7A) }
    }

    private static func parseAuthority(_ authority: UnsafeBufferPointer<UInt8>, isSecure: Bool) throws(HTTPClientError) -> (String, Int, Bool) {
        guard !authority.contains(UInt8(ascii: "@")) else { throw .invalidRequest("user information in URLs is not supported") }
        var hostPart = authority[...]
        var portPart: Slice<UnsafeBufferPointer<UInt8>>?
        let bracketed = authority.first == UInt8(ascii: "[")
        if bracketed {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { throw .invalidRequest("the URL's IPv6 address is not closed") }
            hostPart = authority[1..<close]
            let after = authority[(close + 1)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { throw .invalidRequest("the URL's authority is malformed") }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: UInt8(ascii: ":")) {
            hostPart = authority[..<colon]
            portPart = authority[(colon + 1)...]
        }
        var port = isSecure ? 443 : 80
        if let portPart {
            guard !portPart.isEmpty, portPart.count <= 5, portPart.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  case let number = portPart.reduce(0, { $0 * 10 + Int($1 - 0x30) }), (1...65535).contains(number) else {
                throw .invalidRequest("the URL's port is not a number from 1 to 65535")
            }
            port = number
        }
        guard !hostPart.isEmpty else { throw .invalidRequest("the URL has no host") }
        if bracketed {
            // Only what IPv6 text is made of: inet_pton stops at a NUL, and what followed it
            // (CR, LF, a header) would go into the Host field.
            guard hostPart.allSatisfy({ isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else {
                throw .invalidRequest("the URL's IPv6 address is malformed")
            }
            let address = String(decoding: hostPart, as: UTF8.self).lowercased()
            guard isAddress(address, family: AF_INET6) else { throw .invalidRequest("the URL's IPv6 address is malformed") }
            return (address, port, true)
        }
        guard hostPart.allSatisfy(isHostNameByte) else { throw .invalidRequest("the URL's host name holds characters a host name cannot") }
        let host = String(decoding: hostPart.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
        // Only something of digits and dots can be an IPv4 address.
        let maybeIPv4 = hostPart.allSatisfy { $0 == UInt8(ascii: ".") || ($0 >= 0x30 && $0 <= 0x39) }
        return (host, port, maybeIPv4 && isAddress(host, family: AF_INET))
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
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

    private static func isAddress(_ text: String, family: Int32) -> Bool {
        var buffer = in6_addr() // large enough for either family
        return inet_pton(family, text, &buffer) == 1
    }
}
