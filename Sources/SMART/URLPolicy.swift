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

    /// Whether `url`, named by the discovery documents of the registered EHR `iss`, may be
    /// contacted for it: a usable endpoint, on a loopback host only when `iss` is on one
    /// too. A remote EHR's documents must not steer smart-bff's requests (a code with its
    /// PKCE verifier, the client's secret or assertion, tokens) to a service on smart-bff's
    /// own machine.
    public static func isUsableEndpoint(_ url: String, namedBy iss: String) -> Bool {
        guard isUsableEndpoint(url) else { return false }
        guard let host = URLComponents(string: url)?.host, isOnThisMachine(host) else { return true }
        return URLComponents(string: iss)?.host.map(isLoopback) ?? false
    }

    /// Whether `host` leads to this machine however it is written: `isLoopback`'s forms, a
    /// name under `localhost` (RFC 6761 §6.3) with or without a final dot, and any IPv4 or
    /// IPv6 literal the resolver reads as a loopback or unspecified address (`127.1`,
    /// `2130706433`, `0.0.0.0`, `[0:0:0:0:0:0:0:1]`, `[::]`, `[::ffff:127.0.0.1]`).
    /// Stricter than `isLoopback` in what it catches, so never used to allow cleartext.
    public static func isOnThisMachine(_ host: String) -> Bool {
        if isLoopback(host) { return true }
        var h = host.lowercased()
        if h.hasPrefix("["), h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        let name = h.hasSuffix(".") ? String(h.dropLast()) : h
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, h, &v6) == 1 {
            // ::, ::1, and the IPv4-compatible (::a.b.c.d) and -mapped (::ffff:a.b.c.d) forms
            // of 0/8 and 127/8: the first 80 bits zero, then 0000 or ffff, then the IPv4 address.
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            guard bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == bytes[11], bytes[10] == 0 || bytes[10] == 0xFF else { return false }
            return bytes[12] == 127 || bytes[12] == 0
        }
        var v4 = in_addr()
        guard inet_aton(h, &v4) != 0 else { return false }
        let first = UInt8(truncatingIfNeeded: UInt32(bigEndian: v4.s_addr) >> 24)
        return first == 127 || first == 0
    }

    /// `localhost`, `::1` (bracketed or not), or an IPv4 literal in 127.0.0.0/8: four
    /// decimal octets 0–255, the first 127. A name that only starts like one
    /// (`127.0.0.1.nip.io`, `127.attacker.example`) is not: DNS decides where it goes.
    /// Leading zeros are refused too, as some resolvers read them as octal and others
    /// then look the text up as a name.
    public static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased()
        if h == "localhost" || h == "::1" || h == "[::1]" { return true }
        let octets = h.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard octets.count == 4, octets[0].elementsEqual("127".utf8) else { return false }
        return octets.allSatisfy { octet in
            guard (1...3).contains(octet.count), octet.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                  octet.count == 1 || octet.first != UInt8(ascii: "0") else { return false }
            return octet.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) } <= 255
        }
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

    /// `url` with `items` in its query, and no other item of their names: `return_to` may
    /// carry a `bff_launch` or `handoff` from an earlier sign-in (a page's own URL), and an
    /// app that reads a parameter's first value must read this sign-in's.
    public static func settingQuery(_ url: String, _ items: [(String, String)]) -> String {
        let names = Set(items.map(\.0))
        let end = url.firstIndex(of: "#") ?? url.endIndex
        guard let question = url[..<end].firstIndex(of: "?") else { return appendingQuery(url, items) }
        let kept = url[url.index(after: question)..<end].split(separator: "&").filter { item in
            let name = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
            return !names.contains(PercentEncoding.decodeFormComponent(name) ?? String(name))
        }
        let rest = kept.isEmpty ? "" : "?" + kept.joined(separator: "&")
        return appendingQuery(String(url[..<question]) + rest + url[end...], items)
    }

}
