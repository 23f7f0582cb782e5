@testable import HTTPCore
import Testing

/// Versions, methods and connection semantics the parser decides: what is not served
/// (CONNECT, upgrades, HTTP/2, other versions), Expect, and keep-alive.
@Suite("parser: versions, CONNECT, upgrades, Expect, keep-alive")
struct ParserProtocolTests {
    @Test("CONNECT is 501")
    func connect() { #expect(Wire.refusal("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n") == 501) }

    @Test("an Upgrade request is answered over HTTP/1.1 as the connection's last: nothing after it is read as a request")
    func upgrade() {
        let websocket = Wire.request("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
        #expect(websocket?.target == "/" && websocket?.keepAlive == false)
        let h2c = Wire.request("GET /x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n")
        #expect(h2c?.target == "/x" && h2c?.keepAlive == false)
        // What follows (the new protocol's bytes, or a request smuggled behind a proxy that
        // took the connection for a tunnel) is never a second request.
        let result = feed([Wire.bytes("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n")])
        #expect(result.requests.map(\.target) == ["/"])
    }

    @Test("the HTTP/2 connection preface (PRI * HTTP/2.0) is 505")
    func http2Preface() {
        #expect(Wire.refusal("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") == 505)
        #expect(Wire.refusal("PRI * HTTP/1.1\r\nHost: a\r\n\r\n") == 505)
    }

    @Test("HTTP/2.0 and HTTP/0.9 request lines are 505; a later HTTP/1 minor version is read as HTTP/1.1 (RFC 9110 §2.5)")
    func unsupportedVersions() {
        #expect(Wire.refusal("GET / HTTP/2.0\r\nHost: a\r\n\r\n") == 505)
        #expect(Wire.refusal("GET / HTTP/0.9\r\n\r\n") == 505)
        let later = Wire.request("GET / HTTP/1.2\r\nHost: a\r\n\r\n")
        #expect(later?.version == .http11 && later?.keepAlive == true)
        #expect(Wire.refusal("GET / HTTP/1.9\r\n\r\n") == 400, "as HTTP/1.1, it needs a Host")
    }

    @Test("a malformed version is 400")
    func malformedVersion() {
        #expect(Wire.refusal("GET / HTTP/1.10\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / http/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET /\r\n\r\n") == 400)
    }

    @Test("Expect: 100-continue with a body asks for the interim response, then reads the body")
    func expectContinue() throws {
        var parser = RequestParser()
        let head = Wire.bytes("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        guard case let .continueRequested(consumed) = parser.parse(head) else { Issue.record("no 100-continue"); return }
        #expect(consumed == head.count)
        guard case let .complete(request, used) = parser.parse(Wire.bytes("ok")) else { Issue.record("body not read"); return }
        #expect(request.body == Wire.bytes("ok") && used == 2)
    }

    @Test("Expect: 100-continue without a body completes at once")
    func expectContinueWithoutBody() {
        guard case .complete = Wire.firstOutcome("GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n\r\n") else {
            Issue.record("expected a complete request"); return
        }
    }

    @Test("Expect: 100-continue from an HTTP/1.0 client is ignored: no interim response, the body is read")
    func expectContinueHTTP10() {
        var parser = RequestParser()
        guard case .needMoreData = parser.parse(Wire.bytes("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")) else {
            Issue.record("expected to wait for the body without asking for 100 Continue"); return
        }
        guard case let .complete(request, _) = parser.parse(Wire.bytes("ok")) else { Issue.record("body not read"); return }
        #expect(request.body == Wire.bytes("ok"))
    }

    @Test("Expect: foo is 417")
    func expectOther() { #expect(Wire.refusal("POST / HTTP/1.1\r\nHost: a\r\nExpect: foo\r\nContent-Length: 1\r\n\r\nx") == 417) }

    @Test("HTTP/1.0 closes by default")
    func http10DefaultClose() { #expect(Wire.request("GET / HTTP/1.0\r\n\r\n")?.keepAlive == false) }

    @Test("HTTP/1.0 with Connection: keep-alive stays open")
    func http10KeepAlive() { #expect(Wire.request("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")?.keepAlive == true) }

    @Test("HTTP/1.1 stays open by default")
    func http11DefaultKeepAlive() { #expect(Wire.request("GET / HTTP/1.1\r\nHost: a\r\n\r\n")?.keepAlive == true) }

    @Test("Connection: close in HTTP/1.1 closes, among other options too")
    func http11Close() {
        #expect(Wire.request("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")?.keepAlive == false)
        #expect(Wire.request("GET / HTTP/1.1\r\nHost: a\r\nConnection: te, CLOSE\r\n\r\n")?.keepAlive == false)
    }

    @Test("Connection is a list of tokens read byte by byte: empty elements are skipped, anything else is 400")
    func connectionTokens() {
        #expect(Wire.request("GET / HTTP/1.1\r\nHost: a\r\nConnection: , close,\r\n\r\n")?.keepAlive == false)
        #expect(Wire.request("GET / HTTP/1.1\r\nHost: a\r\nConnection: \t\r\n\r\n")?.keepAlive == true)
        // A comma then a combining mark (U+0301, bytes CC 81) is one Character in Swift: a
        // split by Characters saw "foo" and ",\u{301} close" and missed the close.
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo,\u{CC}\u{81} close\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nConnection: \"close\"\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nConnection: close keep-alive\r\n\r\n") == 400)
    }

    @Test("close wins over keep-alive, whatever their order (RFC 9112 §9.3)")
    func closeWinsOverKeepAlive() {
        #expect(Wire.request("GET / HTTP/1.0\r\nConnection: close, keep-alive\r\n\r\n")?.keepAlive == false)
        #expect(Wire.request("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n")?.keepAlive == false)
        #expect(Wire.request("GET / HTTP/1.1\r\nHost: a\r\nConnection: close, keep-alive\r\n\r\n")?.keepAlive == false)
    }

    @Test("after a closing request, empty lines are tolerated and anything else is 400")
    func dataAfterClose() {
        #expect(Wire.requests("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n\r\n\r\n").count == 1)
        let result = feed([Wire.bytes("GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\n\r\n")])
        #expect(result.requests.count == 1 && result.refusal == 400)
    }

    @Test("a body with Content-Length is read exactly; the next request follows it")
    func contentLengthBody() {
        let requests = Wire.requests("POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(requests.map(\.target) == ["/a", "/b"])
        #expect(requests.first?.body == Wire.bytes("hello"))
    }
}
