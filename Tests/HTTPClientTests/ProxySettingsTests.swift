@testable import HTTPClient
import Foundation
import Testing

/// Which egress proxy a request goes through, from the configuration and the environment.
@Suite("HTTPClient: ProxySettings")
struct ProxySettingsTests {
    /// The proxy `url` goes through; nil to connect directly.
    static func proxy(for url: String, configured: String? = nil, _ environment: [String: String]) throws -> ProxySettings.Proxy? {
        try ProxySettings(configured: configured, environment: environment).proxy(for: UpstreamURL(url))
    }

    @Test func httpsURLsUseHttpsProxyThenHTTPSProxyThenAllProxy() throws {
        let all = ["https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2", "all_proxy": "http://all:3", "ALL_PROXY": "http://ALL:4"]
        let https = "https://fhir.example.org/x"
        #expect(try Self.proxy(for: https, all)?.host == "lower")
        #expect(try Self.proxy(for: https, all.filter { $0.key != "https_proxy" })?.host == "upper")
        #expect(try Self.proxy(for: https, ["https_proxy": "", "HTTPS_PROXY": "http://upper:2"])?.host == "upper") // empty: unset
        #expect(try Self.proxy(for: https, ["all_proxy": "http://all:3", "ALL_PROXY": "http://other:4"])?.host == "all")
        #expect(try Self.proxy(for: https, ["ALL_PROXY": "http://all:3"])?.host == "all")
        #expect(try Self.proxy(for: https, ["http_proxy": "http://plain:1"]) == nil)
        #expect(try Self.proxy(for: https, [:]) == nil)
    }

    /// Upper-case `HTTP_PROXY` is what a CGI program sees for a request's `Proxy:` header
    /// (httpoxy): it never decides where plain-http requests go.
    @Test func httpURLsUseLowerCaseHttpProxyOnly() throws {
        let http = "http://fhir.example.org/x"
        #expect(try Self.proxy(for: http, ["HTTP_PROXY": "http://attacker:8080"]) == nil)
        #expect(try Self.proxy(for: http, ["HTTP_PROXY": "http://attacker:8080", "http_proxy": "http://lower:1"])?.host == "lower")
        #expect(try Self.proxy(for: http, ["HTTP_PROXY": "http://attacker:8080", "all_proxy": "http://all:3"])?.host == "all")
        #expect(try Self.proxy(for: http, ["https_proxy": "http://secure:1", "HTTPS_PROXY": "http://secure:2"]) == nil)
    }

    @Test(arguments: [
        ("example.org", "example.org", true),
        ("example.org", "api.example.org", true),
        ("example.org", "a.b.example.org", true),
        ("example.org", "notexample.org", false),
        ("example.org", "example.org.evil.test", false),
        (".example.org", "api.example.org", true),
        (".example.org", "example.org", true),
        ("EXAMPLE.ORG", "example.org", true),
        ("other.test, example.org", "example.org", true),
        ("other.test,example.org", "api.example.org", true),
        ("other.test", "example.org", false),
        ("*", "anything.test", true),
        ("127.0.0.1", "127.0.0.1", true),
        ("127.0.0.1", "127.0.0.2", false),
        ("[::1]", "[::1]", true),
        ("10.0.0.0/8", "10.20.30.40", true),
        ("10.0.0.0/8", "11.0.0.1", false),
        ("192.168.4.0/23", "192.168.5.9", true),
        ("192.168.4.0/23", "192.168.6.1", false),
        ("fd00::/8", "[fd12::7]", true),
        ("fd00::/8", "[fe80::1]", false),
        ("10.0.0.0/8", "10.example.org", false),
        ("0.0.0.0/0", "203.0.113.9", true),
        ("", "example.org", false),
        // A fully qualified name's final dot, on either side, as libcurl reads it.
        ("example.org", "example.org.", true),
        ("example.org.", "example.org", true),
        ("example.org.", "api.example.org.", true),
        // A bracketed IPv6 range.
        ("[fd00::]/8", "[fd00::1]", true),
        ("[fd00::]/8", "[fe80::1]", false),
    ])
    func noProxy(noProxy: String, host: String, exempt: Bool) throws {
        for variable in ["no_proxy", "NO_PROXY"] {
            let proxy = try Self.proxy(for: "https://\(host):8443/x", ["https_proxy": "http://proxy:3128", variable: noProxy])
            #expect((proxy == nil) == exempt, "\(variable)=\(noProxy)")
        }
    }

    @Test("plain http to a loopback host never goes through a proxy (its tokens would cross the network in cleartext); https to one may, as a tunnel")
    func plainHTTPToLoopbackStaysOnTheMachine() throws {
        let environment = ["http_proxy": "http://proxy:3128", "https_proxy": "http://proxy:3128", "all_proxy": "http://proxy:3128"]
        for url in ["http://127.0.0.1:8080/fhir", "http://localhost:8080/fhir", "http://[::1]:8080/fhir", "http://127.9.9.9/fhir", "http://localhost./fhir"] {
            #expect(try Self.proxy(for: url, environment) == nil, "\(url)")
            #expect(try Self.proxy(for: url, configured: "http://configured:3128", [:]) == nil, "\(url)")
        }
        #expect(try Self.proxy(for: "https://localhost:8443/fhir", environment)?.host == "proxy")
        #expect(try Self.proxy(for: "http://fhir.example.org/fhir", environment)?.host == "proxy")
        #expect(try Self.proxy(for: "http://[::2]/fhir", environment)?.host == "proxy")
    }

    @Test func theConfiguredProxyWinsOverTheEnvironment() throws {
        let environment = ["https_proxy": "http://env:1", "http_proxy": "http://env:2", "all_proxy": "http://env:3"]
        for url in ["https://example.org/", "http://example.org/"] {
            let proxy = try Self.proxy(for: url, configured: "http://configured:3128", environment)
            #expect(proxy?.host == "configured" && proxy?.port == 3128, "\(url)")
        }
    }

    @Test func userInformationBecomesBasicProxyAuthorization() throws {
        let proxy = try #require(try Self.proxy(for: "https://example.org/", configured: "http://user:p%40ss@proxy.internal:3128", [:]))
        #expect(proxy.host == "proxy.internal" && proxy.port == 3128)
        #expect(proxy.authorization == "Basic " + Data("user:p@ss".utf8).base64EncodedString())
        #expect(proxy.authorization == "Basic dXNlcjpwQHNz")

        #expect(try Self.proxy(for: "https://example.org/", configured: "http://user@proxy:3128", [:])?.authorization
            == "Basic " + Data("user:".utf8).base64EncodedString())
        #expect(try Self.proxy(for: "https://example.org/", configured: "http://proxy:3128", [:])?.authorization == nil)
    }

    @Test(arguments: [
        ("http://proxy.internal", "proxy.internal", 1080),
        ("http://proxy.internal/", "proxy.internal", 1080),
        ("proxy.internal", "proxy.internal", 1080),
        ("proxy.internal:3128", "proxy.internal", 3128),
        ("HTTP://Proxy.Internal:3128/", "proxy.internal", 3128),
        ("http://user:pw@proxy.internal", "proxy.internal", 1080),
        ("http://[::1]", "::1", 1080),
        ("http://[::1]:3128", "::1", 3128),
        (" http://10.0.0.1:8080 ", "10.0.0.1", 8080),
    ])
    func hostAndPort(setting: String, host: String, port: Int) throws {
        let proxy = try Self.proxy(for: "https://example.org/", configured: setting, [:])
        #expect(proxy?.host == host)
        #expect(proxy?.port == port)
    }

    /// Proxies the client cannot speak to fail the request (never a silent direct connection).
    @Test(arguments: ["socks5://proxy:1080", "socks5h://proxy:1080", "https://proxy:3128", "http://proxy:3128/path",
                      "http://proxy:99999", "http://pro xy:3128"])
    func unusableProxyFailsAsConnectFailure(setting: String) throws {
        for url in ["https://example.org/", "http://example.org/"] {
            let configured = #expect(throws: HTTPClientError.self) { try Self.proxy(for: url, configured: setting, [:]) }
            #expect(configured?.isConnectFailure == true)
            let fromEnvironment = #expect(throws: HTTPClientError.self) { try Self.proxy(for: url, ["all_proxy": setting]) }
            #expect(fromEnvironment?.isConnectFailure == true)
        }
        // Not used (no_proxy), it does no harm.
        #expect(try Self.proxy(for: "https://example.org/", ["all_proxy": setting, "no_proxy": "example.org"]) == nil)
    }

    /// What the start-up log says: where requests go, never the proxy's credentials; and why
    /// a setting cannot be used, so that an operator hears of it before requests fail.
    @Test func summaryAndProblemForTheStartUpLog() {
        let authenticated = ProxySettings(configured: nil, environment: ["https_proxy": "http://svc:s3cret@proxy.internal:3128", "no_proxy": "a.test,b.test"])
        #expect(authenticated.summary == "https via proxy.internal:3128, http direct, 2 no_proxy entries")
        #expect(!authenticated.summary.contains("s3cret") && authenticated.problem == nil)
        #expect(ProxySettings(configured: nil, environment: [:]).summary == "https direct, http direct")
        let socks = ProxySettings(configured: nil, environment: ["all_proxy": "socks5://proxy:1080"])
        #expect(socks.summary == "https unusable proxy setting, http unusable proxy setting")
        #expect(socks.problem?.contains("only http:// proxies") == true)
    }
}
