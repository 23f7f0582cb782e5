@testable import HTTPCore
import Testing

/// Percent-encoding helpers (RFC 3986 §2.1) and the query access built on them.
@Suite("percent-encoding")
struct PercentEncodingTests {
    @Test("decodes %XX escapes in either case")
    func decodes() {
        #expect(PercentEncoding.decode("a%20b%2Fc") == "a b/c")
        #expect(PercentEncoding.decode("%e2%82%ac") == "€")
        #expect(PercentEncoding.decode("plain") == "plain")
    }

    @Test("a truncated or non-hex escape is nil, not passed through")
    func malformedEscapes() {
        #expect(PercentEncoding.decode("a%2") == nil)
        #expect(PercentEncoding.decode("a%") == nil)
        #expect(PercentEncoding.decode("a%zz") == nil)
        #expect(PercentEncoding.decode("%+1") == nil)
    }

    @Test("escapes that decode to invalid UTF-8 are nil")
    func invalidUTF8() {
        #expect(PercentEncoding.decode("%ff") == nil)
        #expect(PercentEncoding.decode("%c3") == nil)
    }

    @Test("plain decoding keeps +; form decoding makes it a space")
    func plusSign() {
        #expect(PercentEncoding.decode("a+b") == "a+b")
        #expect(PercentEncoding.decodeFormComponent("a+b%2B") == "a b+")
    }

    @Test("encoding escapes everything but unreserved characters, and round-trips")
    func encodes() {
        #expect(PercentEncoding.encode("a b/c?d=e&f~_.-") == "a%20b%2Fc%3Fd%3De%26f~_.-")
        #expect(PercentEncoding.encode("€") == "%E2%82%AC")
        for text in ["", "x y", "ä/ö?ü#", "100%", "a+b"] {
            #expect(PercentEncoding.decode(PercentEncoding.encode(text)) == text)
        }
    }

    @Test("formEncode joins encoded pairs with & and =")
    func formEncode() {
        #expect(PercentEncoding.formEncode([("a", "1 2"), ("b&c", "=")]) == "a=1%202&b%26c=%3D")
    }

    @Test("Request splits path and query and decodes query items in order")
    func requestQuery() {
        let request = Request(method: "GET", target: "/p%20q?a=1&b=x+y&a=%32&bad=%zz&flag")
        #expect(request.path == "/p%20q")
        #expect(request.queryItems.map { "\($0.name)=\($0.value)" } == ["a=1", "b=x y", "a=2", "flag="])
        #expect(request.queryParameter("a") == "1")
        #expect(request.queryParameters("a") == ["1", "2"])
        #expect(Request(method: "GET", target: "/x").query == nil)
    }
}
