import BFFTesting
import Foundation
import HTTPClient
import Testing

/// The client over real TLS (OpenSSL on both sides): an upstream is reached only when its
/// certificate chains to a trusted CA, is in date and names the host asked for.
@Suite("HTTPClient: TLS verification")
struct HTTPClientTLSTests {
    /// An https upstream with `identity`'s certificate in front of a plain server that
    /// answers every request with "hello".
    final class Upstream: Sendable {
        let tls: TLSTestServer
        let backend: ScriptedServer

        init(_ identity: TestCertificates.Identity) throws {
            backend = try ScriptedServer.responding { _ in "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" }
            tls = try TLSTestServer(identity: identity)
            tls.forward(to: backend.port)
        }

        func url(host: String = "localhost") -> String { "https://\(host):\(tls.port)/Patient/1" }
    }

    /// A client trusting the test CA only.
    static func clientTrustingTestCA() throws -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.caCertificatesFile = try TestCertificates.caFile()
        return HTTPClient(configuration: configuration)
    }

    @Test(arguments: ["localhost", "127.0.0.1"])
    func certificateFromTheTrustedCAForTheHostIsAccepted(host: String) async throws {
        let upstream = try Upstream(TestCertificates.localhost)
        let client = try Self.clientTrustingTestCA()
        let response = try await client.execute(HTTPClientRequest(url: upstream.url(host: host)))
        #expect(response.status == 200)
        #expect(response.body == Array("hello".utf8))
        #expect(upstream.backend.requests.map(\.target) == ["/Patient/1"])
        // The host name goes in the handshake (SNI), which shared front doors need to pick
        // the certificate; an address does not (RFC 6066).
        #expect(upstream.tls.serverNames == [host == "localhost" ? "localhost" : ""])
    }

    /// Certificates a client trusting the test CA must refuse for "localhost".
    enum Untrusted: String, CaseIterable, Sendable {
        case selfSigned = "self-signed"
        case otherHostsName = "for another host name"
        case expired = "expired"
        case subjectOnly = "naming the host in its CN only, with no subjectAltName"

        var identity: TestCertificates.Identity {
            switch self {
            case .selfSigned: TestCertificates.selfSigned
            case .otherHostsName: TestCertificates.otherName
            case .expired: TestCertificates.expired
            case .subjectOnly: TestCertificates.subjectOnly
            }
        }
    }

    @Test(arguments: Untrusted.allCases)
    func certificateIsRefusedAndNothingIsSent(certificate: Untrusted) async throws {
        let upstream = try Upstream(certificate.identity)
        let client = try Self.clientTrustingTestCA()
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.execute(HTTPClientRequest(url: upstream.url()))
        }
        #expect(error?.isTLSFailure == true, "\(String(reflecting: error))")
        #expect(upstream.backend.requests.isEmpty) // the request (and its bearer token) never left
    }

    @Test func systemBundleDoesNotTrustThePrivateCA() async throws {
        let upstream = try Upstream(TestCertificates.localhost)
        let client = HTTPClient() // defaults: verification on, system CA bundle
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.execute(HTTPClientRequest(url: upstream.url()))
        }
        #expect(error?.isTLSFailure == true, "\(String(reflecting: error))")
        #expect(upstream.backend.requests.isEmpty)
    }

    /// The control for the refusals above: the same self-signed server answers a client that
    /// does not verify, so they come from verification and not from a broken server.
    @Test func withoutVerificationTheSelfSignedServerAnswers() async throws {
        let upstream = try Upstream(TestCertificates.selfSigned)
        var configuration = HTTPClient.Configuration()
        configuration.verifyTLS = false
        let response = try await HTTPClient(configuration: configuration).execute(HTTPClientRequest(url: upstream.url()))
        #expect(response.body == Array("hello".utf8))
        #expect(upstream.tls.completedHandshakes == 1)
    }

    @Test func connectionsAreReusedOverTLS() async throws {
        let upstream = try Upstream(TestCertificates.localhost)
        let client = try Self.clientTrustingTestCA()
        for _ in 0..<5 {
            #expect(try await client.execute(HTTPClientRequest(url: upstream.url())).status == 200)
        }
        #expect(upstream.tls.completedHandshakes == 1)
        #expect(upstream.backend.requests.count == 5)
    }

    @Test("through an egress proxy: a CONNECT tunnel, the proxy's answer kept out of the response, TLS verified end to end")
    func throughAConnectProxy() async throws {
        let upstream = try Upstream(TestCertificates.localhost)
        let proxy = try ConnectProxy()
        var configuration = HTTPClient.Configuration()
        configuration.caCertificatesFile = try TestCertificates.caFile()
        configuration.proxy = proxy.url
        let client = HTTPClient(configuration: configuration)
        let response = try await client.execute(HTTPClientRequest(url: upstream.url()))
        #expect(response.status == 200 && response.body == Array("hello".utf8))
        #expect(!response.headers.contains { $0.name.lowercased() == "proxy-agent" })
        #expect(proxy.tunnels == ["localhost:\(upstream.tls.port)"])

        let impostor = try Upstream(TestCertificates.otherName)
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.execute(HTTPClientRequest(url: impostor.url()))
        }
        #expect(error?.isTLSFailure == true, "\(String(reflecting: error))")
        #expect(impostor.backend.requests.isEmpty)
    }

    @Test("bytes after a response, in a TLS record of their own read ahead with it: the connection is not used again")
    func bytesReadAheadAfterTheResponseAreNotTakenForTheNextAnswer() async throws {
        let stale = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale"
        let backend = try ScriptedServer { connection in
            while let request = connection.readRequest() {
                // The answer, and then what nobody asked for, in one write.
                connection.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + String(request.target.suffix(5)) + stale)
            }
        }
        let tls = try TLSTestServer(identity: TestCertificates.localhost)
        tls.forward(to: backend.port)
        tls.limitRecords(to: 43) // the answer alone in the first record, the rest in the next ones
        let client = try Self.clientTrustingTestCA()
        for id in ["first", "again"] {
            let response = try await client.execute(HTTPClientRequest(url: "https://localhost:\(tls.port)/id/\(id)"))
            #expect(response.body == Array(id.utf8)) // never the stale bytes
        }
        #expect(backend.connectionCount == 2)
    }

    @Test("over TLS 1.2, only suites with forward secrecy and AEAD: a server offering static-RSA key exchange or CBC with SHA-1 alone is refused")
    func tls12CipherSuites() async throws {
        let backend = try ScriptedServer.responding { _ in "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" }
        let weak = try TLSTestServer(identity: TestCertificates.localhost, tls12Ciphers: "AES128-SHA:AES256-GCM-SHA384:ECDHE-RSA-AES128-SHA:ECDHE-ECDSA-AES128-SHA")
        weak.forward(to: backend.port)
        let client = try Self.clientTrustingTestCA()
        await #expect(throws: HTTPClientError.self) { try await client.execute(HTTPClientRequest(url: "https://localhost:\(weak.port)/")) }
        #expect(backend.connectionCount == 0)
        let strong = try TLSTestServer(identity: TestCertificates.localhost, tls12Ciphers: "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256")
        strong.forward(to: backend.port)
        #expect(try await client.execute(HTTPClientRequest(url: "https://localhost:\(strong.port)/")).status == 200)
    }

    @Test("HTTP/1.1 even to a server that offers HTTP/2, as most EHR front doors do")
    func http11EvenWhenHTTP2IsOffered() async throws {
        let upstream = try Upstream(TestCertificates.localhost) // ALPN: h2 preferred, http/1.1 too
        let response = try await Self.clientTrustingTestCA().execute(HTTPClientRequest(url: upstream.url()))
        #expect(response.status == 200 && response.body == Array("hello".utf8))
        #expect(upstream.tls.negotiatedProtocols == ["http/1.1"])
    }

    @Test("an upstream that closes after every response: each request shakes hands anew, resuming the first session, and all succeed")
    func upstreamClosingEveryConnection() async throws {
        let backend = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
        } // the script returns and the connection closes
        let tls = try TLSTestServer(identity: TestCertificates.localhost)
        tls.forward(to: backend.port)
        let client = try Self.clientTrustingTestCA()
        for _ in 0..<4 {
            let response = try await client.execute(HTTPClientRequest(url: "https://localhost:\(tls.port)/Patient/1"))
            #expect(response.status == 200 && response.body == Array("hello".utf8))
        }
        #expect(tls.completedHandshakes == 4 && backend.connectionCount == 4)
        #expect(tls.resumedHandshakes == 3) // one full handshake; the others resume it

    }
}
