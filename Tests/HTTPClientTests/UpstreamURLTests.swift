@testable import HTTPClient
import Testing

/// Which URLs the client fetches, and what it takes from them: where the connection goes
/// (host, port), what the request line carries (target) and the `Host` field (authority).
@Suite("HTTPClient: UpstreamURL")
struct UpstreamURLTests {
    struct Accepted: Sendable, CustomTestStringConvertible {
        let url: String
        let isSecure: Bool
        let host: String
        let port: Int
        let target: String
        let authority: String
        var isIPAddress = false
        var testDescription: String { url }
    }

    @Test(arguments: [
        Accepted(url: "http://[::1]:8080/x?y", isSecure: false, host: "::1", port: 8080, target: "/x?y", authority: "[::1]:8080", isIPAddress: true),
        Accepted(url: "https://[2001:DB8::1]/x", isSecure: true, host: "2001:db8::1", port: 443, target: "/x", authority: "[2001:db8::1]", isIPAddress: true),
        Accepted(url: "http://127.0.0.1:8080/x", isSecure: false, host: "127.0.0.1", port: 8080, target: "/x", authority: "127.0.0.1:8080", isIPAddress: true),
        Accepted(url: "https://fhir.example.org/r4/Patient?_id=1", isSecure: true, host: "fhir.example.org", port: 443,
                 target: "/r4/Patient?_id=1", authority: "fhir.example.org"),
        Accepted(url: "http://example.org:80/a", isSecure: false, host: "example.org", port: 80, target: "/a", authority: "example.org"),
        Accepted(url: "https://example.org:443/a", isSecure: true, host: "example.org", port: 443, target: "/a", authority: "example.org"),
        Accepted(url: "https://example.org:80/a", isSecure: true, host: "example.org", port: 80, target: "/a", authority: "example.org:80"),
        Accepted(url: "http://example.org:443/a", isSecure: false, host: "example.org", port: 443, target: "/a", authority: "example.org:443"),
        Accepted(url: "HTTPS://Example.ORG/Path/To?Q=A", isSecure: true, host: "example.org", port: 443, target: "/Path/To?Q=A", authority: "example.org"),
        Accepted(url: "Http://EXAMPLE.org:8443", isSecure: false, host: "example.org", port: 8443, target: "/", authority: "example.org:8443"),
        Accepted(url: "http://example.org", isSecure: false, host: "example.org", port: 80, target: "/", authority: "example.org"),
        Accepted(url: "http://example.org?x=1", isSecure: false, host: "example.org", port: 80, target: "/?x=1", authority: "example.org"),
        Accepted(url: "http://example.org/a/b#section", isSecure: false, host: "example.org", port: 80, target: "/a/b", authority: "example.org"),
        Accepted(url: "http://example.org#top", isSecure: false, host: "example.org", port: 80, target: "/", authority: "example.org"),
        Accepted(url: "http://example.org/a?b=c#d?e", isSecure: false, host: "example.org", port: 80, target: "/a?b=c", authority: "example.org"),
        Accepted(url: "http://example.org/a%2Fb?x=%20&y=%C3%A9", isSecure: false, host: "example.org", port: 80,
                 target: "/a%2Fb?x=%20&y=%C3%A9", authority: "example.org"),
        Accepted(url: "http://my_host-1.internal:65535/", isSecure: false, host: "my_host-1.internal", port: 65535, target: "/",
                 authority: "my_host-1.internal:65535"),
    ])
    func accepted(_ expected: Accepted) throws {
        let url = try UpstreamURL(expected.url)
        #expect(url.isSecure == expected.isSecure)
        #expect(url.host == expected.host)
        #expect(url.port == expected.port)
        #expect(url.target == expected.target)
        #expect(url.authority == expected.authority)
        #expect(url.isIPAddress == expected.isIPAddress)
    }

    /// A CONNECT names the port even when it is the default one.
    @Test func hostAndPortAlwaysCarriesThePort() throws {
        #expect(try UpstreamURL("https://example.org/x").hostAndPort == "example.org:443")
        #expect(try UpstreamURL("https://[::1]/x").hostAndPort == "[::1]:443")
        #expect(try UpstreamURL("http://example.org:8080/x").hostAndPort == "example.org:8080")
    }

    @Test(arguments: [
        // user information (credentials in URLs, and `http://trusted@evil/` confusion)
        "http://user@example.org/", "http://user:password@example.org/", "https://user:pw@127.0.0.1:8443/x",
        "http://example.org\\@evil.example/",
        // ports
        "http://example.org:0/", "http://example.org:65536/", "http://example.org:99999/", "http://example.org:000080/",
        "http://example.org:80a/", "http://example.org:http/", "http://example.org:/", "http://example.org:+80/",
        "http://example.org:-1/", "http://[::1]:0/", "http://[::1]:/",
        // no host
        "http:///x", "http://:8080/x", "http://", "https://?x", "https://#x",
        // the target: visible ASCII only
        "http://example.org/a b", "http://example.org/é", "http://example.org/a\tb", "http://example.org/?q=a\u{7F}",
        "http://example.org/x\r\nX-Injected: 1",
        // host names
        "http://exa mple.org/", "http://exämple.org/", "http://exa%6Dple.org/", "http://example.org;x/",
        // IPv6
        "http://[::1/x", "http://[::1", "http://[::1]x/", "http://[example.org]/", "http://[::g]/",
        // schemes
        "ftp://example.org/", "example.org/x", "http:/example.org/", "//example.org/",
    ])
    func refused(_ text: String) {
        let error = #expect(throws: HTTPClientError.self) { try UpstreamURL(text) }
        #expect(error?.isInvalidRequest == true)
    }

    /// inet_pton reads a C string, which ends at a NUL: what followed it in brackets (CR,
    /// LF, a whole header) went into the Host field unchecked.
    @Test(arguments: ["http://[::1\u{0}\r\nX-Injected: 1]/", "http://[::1\u{0}]/", "https://[2001:db8::1\u{0}x]:8443/"])
    func refusesAnIPv6AddressWithANUL(_ text: String) {
        let error = #expect(throws: HTTPClientError.self) { try UpstreamURL(text) }
        #expect(error?.isInvalidRequest == true)
    }
}
