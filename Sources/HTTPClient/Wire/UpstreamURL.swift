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
    /// The host is an IP address (no name to resolve, no SNI).
    let isIPAddress: Bool
    /// The URL as given, and where in its UTF-8 the target lies: the target goes on the wire
    /// from there, never copied into a string of its own (an allocation per request).
    private let text: String
    private let targetBytes: Range<Int>
    /// The URL has neither path nor query (`http://host`, `http://host?q`): "/" goes first.
    private let targetNeedsSlash: Bool

    /// The request target in origin form: the path ("/" at least) and the query.
    var target: String {
        var target: [UInt8] = []
        appendTarget(to: &target)
        return String(decoding: target, as: UTF8.self)
    }

    /// Appends `target` to `out`.
    func appendTarget(to out: inout [UInt8]) {
        if targetNeedsSlash { out.append(UInt8(ascii: "/")) }
        var text = text // withUTF8 is mutating; a native string is not copied
        text.withUTF8 { out.append(contentsOf: UnsafeBufferPointer(rebasing: $0[targetBytes])) }
    }

    /// The length of `target` in bytes.
    var targetCount: Int { targetBytes.count + (targetNeedsSlash ? 1 : 0) }

    /// The `Host` field's value: the host (IPv6 in brackets), with the port unless it is the
    /// scheme's default.
    var authority: String {
        var authority: [UInt8] = []
        appendAuthority(to: &authority)
        return String(decoding: authority, as: UTF8.self)
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
            out.append(decimal: port)
        }
    }

    /// `host:port` (IPv6 in brackets), as a CONNECT request names its target.
    var hostAndPort: String { (isIPv6 ? "[\(host)]" : host) + ":\(port)" }

    private var isIPv6: Bool { host.utf8.contains(UInt8(ascii: ":")) }

    init(_ text: String) throws(HTTPClientError) {
        var text = text // made contiguous UTF-8 here, if it was not, once
        let parsed = text.withUTF8 { bytes in Result { () throws(HTTPClientError) in try UpstreamURL.parse(bytes) } }
        (isSecure, host, port, isIPAddress, targetBytes, targetNeedsSlash) = try parsed.get()
        self.text = text
    }

    /// Equal when they lead to the same place with the same target (the fragment, which is
    /// dropped, does not count).
    static func == (a: UpstreamURL, b: UpstreamURL) -> Bool {
        a.isSecure == b.isSecure && a.host == b.host && a.port == b.port && a.isIPAddress == b.isIPAddress && a.target == b.target
    }

    /// Over the URL's bytes: the proxy's profile showed Character-wise Substring work here.
    /// Returns the scheme, host, port, whether the host is an IP address, where the target
    /// (path and query) lies, and whether it lacks the leading "/".
    private static func parse(_ url: UnsafeBufferPointer<UInt8>) throws(HTTPClientError) -> (Bool, String, Int, Bool, Range<Int>, Bool) {
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
        guard ByteClass.target.containsAll(UnsafeBufferPointer(rebasing: url[i..<end])) else {
            throw .invalidRequest("the URL holds spaces, control characters or non-ASCII bytes")
        }
        return (isSecure, host, port, isIPAddress, i..<end, i == end || url[i] != UInt8(ascii: "/"))
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
            guard hostPart.allSatisfy({ isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }),
                  isAddress(hostPart, family: AF_INET6) else {
                throw .invalidRequest("the URL's IPv6 address is malformed")
            }
            return (lowercased(hostPart), port, true)
        }
        guard hostPart.allSatisfy(isHostNameByte) else { throw .invalidRequest("the URL's host name holds characters a host name cannot") }
        // Only something of digits and dots can be an IPv4 address.
        let maybeIPv4 = hostPart.allSatisfy { $0 == UInt8(ascii: ".") || ($0 >= 0x30 && $0 <= 0x39) }
        return (lowercased(hostPart), port, maybeIPv4 && isAddress(hostPart, family: AF_INET))
    }

    /// ASCII `bytes` as a string, letters in lower case; no intermediate array.
    private static func lowercased(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> String {
        guard bytes.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) else { return String(decoding: bytes, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: bytes.count) { out in
            for (offset, byte) in bytes.enumerated() { out[offset] = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }
            return bytes.count
        }
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

    /// Whether `text` is an address of `family` (inet_pton); its C string is made on the
    /// stack (a String's would be an array on the heap).
    private static func isAddress(_ text: Slice<UnsafeBufferPointer<UInt8>>, family: Int32) -> Bool {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: text.count + 1) { cString in
            for (offset, byte) in text.enumerated() { cString[offset] = CChar(bitPattern: byte) }
            cString[text.count] = 0
            var buffer = in6_addr() // large enough for either family
            return inet_pton(family, cString.baseAddress!, &buffer) == 1
        }
    }
}
