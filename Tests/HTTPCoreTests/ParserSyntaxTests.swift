@testable import HTTPCore
import Testing

/// Message syntax (RFC 9112 §2–§5, RFC 9110 §5): line endings, field syntax, tokens, Host and
/// request-target forms.
@Suite("parser: line and field syntax")
struct ParserSyntaxTests {
    @Test("obs-fold (a field line starting with SP or HTAB) is 400")
    func obsFold() {
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n folded\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\tfolded\r\n\r\n") == 400)
    }

    @Test("a bare CR in the request line is 400")
    func bareCRInRequestLine() {
        #expect(Wire.refusal("GET / HTTP/1.1\rHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET /a\rb HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
    }

    @Test("a bare CR in a header field is 400")
    func bareCRInHeaders() {
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nX: 1\rY: 2\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\n\rX\r\n\r\n") == 400)
    }

    @Test("a bare LF ending the request line is 400")
    func bareLFInRequestLine() {
        #expect(Wire.refusal("GET / HTTP/1.1\nHost: a\r\n\r\n") == 400)
    }

    @Test("a bare LF ending a header field or the head is 400")
    func bareLFInHeaders() {
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\nX: 1\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\n\n") == 400)
    }

    @Test("a NUL byte in a header value is 400")
    func nulInHeaderValue() { #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nX: a\u{0}b\r\n\r\n") == 400) }

    @Test("a NUL byte in the request target is 400")
    func nulInTarget() { #expect(Wire.refusal("GET /a\u{0}b HTTP/1.1\r\nHost: a\r\n\r\n") == 400) }

    @Test("other control bytes in a header value are 400; HTAB and obs-text are allowed")
    func controlBytesInValue() {
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nX: a\u{7F}b\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nX: a\u{1B}b\r\n\r\n") == 400)
        #expect(Wire.request("GET / HTTP/1.1\r\nHost: a\r\nX: a\tb \u{E9}\r\n\r\n") != nil)
    }

    @Test("whitespace between field name and colon is 400")
    func whitespaceBeforeColon() {
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost : a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nX\t: 1\r\n\r\n") == 400)
    }

    @Test("a field name that is not a token, or a line without a colon, is 400")
    func invalidFieldName() {
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nX(y): 1\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\n: 1\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n") == 400)
    }

    @Test("a method that is not a token (G(ET) is 400")
    func badMethodToken() {
        #expect(Wire.refusal("G(ET / HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET  / HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal(" GET / HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
    }

    @Test("methods are case-sensitive tokens, passed through as sent")
    func methodCaseKept() {
        #expect(Wire.request("get / HTTP/1.1\r\nHost: a\r\n\r\n")?.method == "get")
        #expect(Wire.request("MKCOL / HTTP/1.1\r\nHost: a\r\n\r\n")?.method == "MKCOL")
    }

    @Test("a request target with a space or a non-ASCII byte is 400")
    func badTarget() {
        #expect(Wire.refusal("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET /caf\u{E9} HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET a/b HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
    }

    @Test("HTTP/1.1 without Host is 400; HTTP/1.0 without Host is accepted")
    func missingHost() {
        #expect(Wire.refusal("GET / HTTP/1.1\r\n\r\n") == 400)
        #expect(Wire.request("GET / HTTP/1.0\r\n\r\n")?.target == "/")
    }

    @Test("two Host fields are 400, even with the same value")
    func twoHosts() {
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n") == 400)
    }

    @Test("a Host value with a space, slash or @ is 400")
    func invalidHostValue() {
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a b\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n") == 400)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n") == 400)
    }

    @Test("an absolute-form target for another host is 400")
    func foreignAbsoluteForm() {
        #expect(Wire.refusal("GET http://other.example/x HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET http://a:81/x HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET ftp://a/x HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET http://u@a/x HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
    }

    @Test("an absolute-form target for our Host is accepted and reduced to origin-form")
    func matchingAbsoluteForm() {
        #expect(Wire.request("GET http://a/x?q=1 HTTP/1.1\r\nHost: a\r\n\r\n")?.target == "/x?q=1")
        #expect(Wire.request("GET HTTPS://A:8443 HTTP/1.1\r\nHost: a:8443\r\n\r\n")?.target == "/")
        #expect(Wire.request("GET http://a?q HTTP/1.1\r\nHost: a\r\n\r\n")?.target == "/?q")
        // The same host spelled otherwise: the scheme's default port, an empty port, case.
        #expect(Wire.request("GET http://x:80/healthz HTTP/1.1\r\nHost: x\r\n\r\n")?.target == "/healthz")
        #expect(Wire.request("GET http://x/healthz HTTP/1.1\r\nHost: X:80\r\n\r\n")?.target == "/healthz")
        #expect(Wire.request("GET https://x:443/ HTTP/1.1\r\nHost: x:\r\n\r\n")?.target == "/")
        #expect(Wire.refusal("GET https://x:80/ HTTP/1.1\r\nHost: x\r\n\r\n") == 400)
        #expect(Wire.refusal("GET http://a#frag HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
    }

    @Test("an absolute-form target without Host (HTTP/1.0) is accepted, its authority well-formed")
    func absoluteFormWithoutHost() {
        #expect(Wire.request("GET http://a/healthz HTTP/1.0\r\n\r\n")?.target == "/healthz")
        #expect(Wire.refusal("GET http:///x HTTP/1.0\r\n\r\n") == 400)
        #expect(Wire.refusal("GET http://u@a/x HTTP/1.0\r\n\r\n") == 400)
        #expect(Wire.refusal("GET http://a\"b/x HTTP/1.0\r\n\r\n") == 400)
    }

    @Test("a fragment (#) is never part of a request target: 400, in origin-form and absolute-form")
    func fragmentInTarget() {
        #expect(Wire.refusal("GET /healthz#frag HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET /a?q=1#x HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.refusal("GET http://a/healthz#x HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
        #expect(Wire.request("GET /a?q=%23 HTTP/1.1\r\nHost: a\r\n\r\n")?.target == "/a?q=%23")
    }

    @Test("asterisk-form is accepted for OPTIONS only")
    func asteriskForm() {
        #expect(Wire.request("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n")?.target == "*")
        #expect(Wire.refusal("GET * HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
    }

    @Test("empty lines before the request line are skipped; a bare LF there is 400")
    func emptyLinesBeforeRequest() {
        #expect(Wire.request("\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n")?.target == "/x")
        #expect(Wire.requests("GET /1 HTTP/1.1\r\nHost: a\r\n\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n").map(\.target) == ["/1", "/2"])
        #expect(Wire.refusal("\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n") == 400)
    }

    @Test("field values lose surrounding whitespace and keep inner whitespace; names keep their case")
    func fieldValueTrimming() {
        #expect(Wire.request("GET / HTTP/1.1\r\nHost: a\r\nX-Thing: \t one  two \t\r\n\r\n")?.headers.last == "X-Thing: one  two")
    }
}
