@testable import HTTPCore
import Testing

@Suite("request parser: refusals and framing")
struct ParserTests {
    static func outcome(_ text: String, limits: HTTPLimits = HTTPLimits()) -> Int {
        var parser = RequestParser(limits: limits)
        switch parser.parse(Array(text.utf8)) {
        case .complete: return 200
        case .continueRequested: return 100
        case .needMoreData: return 0
        case let .failed(e): return e.status.code
        }
    }

    @Test("smuggling and malformed requests are refused with the right status", arguments: [
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 4\r\n\r\nabcd", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nabcde", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", 501),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \u{0B}chunked\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n folded\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\rX: 1\r\n\r\n", 400),
        ("GET / HTTP/1.1\nHost: a\n\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nX: a\u{0}b\r\n\r\n", 400),
        ("GET /a\u{0}b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),
        ("G(ET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        ("GET http://other.example/x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 501),
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 400),
        ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        ("GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505),
        ("GET / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n", 417),
        ("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
    ])
    func refused(_ raw: String, _ status: Int) {
        #expect(ParserTests.outcome(raw) == status)
    }

    @Test("limits: 414, 431 (size and count), 413 before the body arrives")
    func limits() {
        #expect(ParserTests.outcome("GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n") == 414)
        #expect(ParserTests.outcome("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 17_000) + "\r\n\r\n") == 431)
        let many = (0..<101).map { "X-\($0): 1\r\n" }.joined()
        #expect(ParserTests.outcome("GET / HTTP/1.1\r\nHost: a\r\n" + many + "\r\n") == 431)
        #expect(ParserTests.outcome("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n") == 413)
        var small = HTTPLimits()
        small.maxBodyBytes = 10
        #expect(ParserTests.outcome("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n", limits: small) == 413)
        #expect(ParserTests.outcome("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n") == 400)
        #expect(ParserTests.outcome("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n") == 400)
    }

    @Test("chunked bodies with extensions and trailers; absolute-form for our own host; empty lines before a request")
    func accepted() throws {
        var parser = RequestParser()
        let raw = "\r\nPOST http://a/x?q=1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=\"v\"\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: t\r\n\r\n"
        guard case let .complete(request, consumed) = parser.parse(Array(raw.utf8)) else { Issue.record("not complete"); return }
        #expect(request.target == "/x?q=1" && request.body == Array("abcde".utf8) && consumed == raw.utf8.count && request.keepAlive)
    }

    @Test("Expect: 100-continue asks for the interim response; connection semantics by version")
    func semantics() {
        #expect(ParserTests.outcome("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n") == 100)
        var p = RequestParser()
        if case let .complete(r, _) = p.parse(Array("GET / HTTP/1.0\r\n\r\n".utf8)) { #expect(!r.keepAlive) } else { Issue.record("1.0") }
        p = RequestParser()
        if case let .complete(r, _) = p.parse(Array("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".utf8)) { #expect(r.keepAlive) } else { Issue.record("1.0 ka") }
        p = RequestParser()
        if case let .complete(r, _) = p.parse(Array("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".utf8)) { #expect(!r.keepAlive) } else { Issue.record("close") }
    }

    @Test("percent-decoding refuses malformed escapes")
    func percent() {
        #expect(PercentEncoding.decode("a%20b") == "a b")
        #expect(PercentEncoding.decode("a%2") == nil && PercentEncoding.decode("a%zz") == nil && PercentEncoding.decode("%ff") == nil)
        #expect(PercentEncoding.decodeFormComponent("a+b") == "a b")
        #expect(PercentEncoding.encode("a b/c") == "a%20b%2Fc")
    }
}

@Suite("router and application")
struct RouterTests {
    func app() -> HTTPApplication {
        var router = Router()
        router.get("/items/:id") { r in .text("item " + (r.pathParameters["id"] ?? "")) }
        router.get("/files/*") { r in .text("file " + (r.pathParameters["*"] ?? "")) }
        router.get("/boom") { _ in struct Secret: Error { let token = "tok-123" }; throw Secret() }
        router.get("/teapot") { _ in throw HTTPError(HTTPStatus(code: 418, reason: "I'm a teapot"), detail: "short and stout") }
        return HTTPApplication(router: router)
    }

    func body(_ r: Response) -> String { if case let .bytes(b) = r.body { return String(decoding: b, as: UTF8.self) }; return "" }

    @Test("path parameters, tail wildcard, HEAD falls back to GET")
    func routing() async {
        #expect(body(await app().respond(to: Request(method: "GET", target: "/items/42"))) == "item 42")
        #expect(body(await app().respond(to: Request(method: "GET", target: "/files/a/b.txt"))) == "file a/b.txt")
        #expect(await app().respond(to: Request(method: "HEAD", target: "/items/1")).status.code == 200)
    }

    @Test("404 and 405 are problem+json; 405 says Allow")
    func problems() async {
        let missing = await app().respond(to: Request(method: "GET", target: "/nope"))
        #expect(missing.status.code == 404 && missing.headers["Content-Type"] == "application/problem+json")
        #expect(body(missing).contains("\"status\":404") && body(missing).contains("\"title\":\"Not Found\""))
        let wrong = await app().respond(to: Request(method: "POST", target: "/items/1"))
        #expect(wrong.status.code == 405 && wrong.headers["Allow"] == "GET, HEAD")
    }

    @Test("handler errors: HTTPError as it says; anything else a 500 without its text")
    func errors() async {
        let teapot = await app().respond(to: Request(method: "GET", target: "/teapot"))
        #expect(teapot.status.code == 418 && body(teapot).contains("short and stout"))
        let boom = await app().respond(to: Request(method: "GET", target: "/boom"))
        #expect(boom.status.code == 500 && !body(boom).contains("tok-123"))
    }

    @Test("X-Request-ID: echoed when plain, replaced when not")
    func requestID() async {
        let plain = await app().respond(to: Request(method: "GET", target: "/items/1", headers: ["X-Request-ID": "abc-123"]))
        #expect(plain.headers["X-Request-ID"] == "abc-123")
        let odd = await app().respond(to: Request(method: "GET", target: "/items/1", headers: ["X-Request-ID": "a b<script>"]))
        #expect(odd.headers["X-Request-ID"] != "a b<script>" && odd.headers["X-Request-ID"] != nil)
    }
}
