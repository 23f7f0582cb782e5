@testable import HTTPCore
import Testing

/// Route matching: literal segments, `:name` parameters, the `*` tail, 405 with the allowed
/// methods, and HEAD answered by GET.
@Suite("router")
struct RouterTests {
    static func pattern(_ match: Router.Match) -> String? {
        if case let .found(_, pattern, _) = match { return pattern }
        return nil
    }

    static func parameters(_ match: Router.Match) -> [String: String]? {
        if case let .found(_, _, parameters) = match { return parameters }
        return nil
    }

    static let router: Router = {
        var r = Router()
        r.get("/items/:id") { _ in .text("") }
        r.get("/items/:id/parts/:part") { _ in .text("") }
        r.post("/items") { _ in .text("") }
        r.get("/files/*") { _ in .text("") }
        r.on("DELETE", "/items/:id") { _ in .text("") }
        r.onImmediate("GET", "/healthz") { _ in .text("ok") }
        r.on("HEAD", "/explicit") { _ in .text("head route") }
        r.get("/explicit") { _ in .text("get route") }
        return r
    }()

    @Test("path parameters are bound by name, still percent-encoded")
    func pathParameters() {
        #expect(Self.parameters(Self.router.match(method: "GET", path: "/items/42")) == ["id": "42"])
        #expect(Self.parameters(Self.router.match(method: "GET", path: "/items/a%2Fb/parts/7")) == ["id": "a%2Fb", "part": "7"])
    }

    @Test("a parameter never matches an empty or missing segment, nor extra segments")
    func parameterShape() {
        #expect(Self.pattern(Self.router.match(method: "GET", path: "/items/")) == nil)
        #expect(Self.pattern(Self.router.match(method: "GET", path: "/items/1/extra")) == nil)
    }

    @Test("* takes the rest of the path, possibly empty")
    func tail() {
        #expect(Self.parameters(Self.router.match(method: "GET", path: "/files/a/b/c.txt")) == ["*": "a/b/c.txt"])
        #expect(Self.parameters(Self.router.match(method: "GET", path: "/files/")) == ["*": ""])
        #expect(Self.pattern(Self.router.match(method: "GET", path: "/filesystem")) == nil)
        #expect(Self.parameters(Self.router.match(method: "GET", path: "/files")) == ["*": ""])
        #expect(Self.parameters(Self.router.match(method: "GET", path: "/files//a/")) == ["*": "/a/"])
        #expect(Self.pattern(Self.router.match(method: "GET", path: "/File/a")) == nil)
    }

    @Test("literal routes match exactly")
    func literal() {
        #expect(Self.pattern(Self.router.match(method: "GET", path: "/healthz")) == "/healthz")
        #expect(Self.pattern(Self.router.match(method: "GET", path: "/healthz/")) == nil)
    }

    @Test("an unknown path is notFound")
    func notFound() {
        guard case .notFound = Self.router.match(method: "GET", path: "/nope") else { Issue.record("expected notFound"); return }
    }

    @Test("a known path with another method is methodNotAllowed, listing the methods (HEAD with GET)")
    func methodNotAllowed() {
        guard case let .methodNotAllowed(allowed, _) = Self.router.match(method: "PUT", path: "/items/1") else {
            Issue.record("expected methodNotAllowed"); return
        }
        #expect(allowed == ["DELETE", "GET", "HEAD"])
    }

    @Test("HEAD falls back to the GET route; an explicit HEAD route wins")
    func headFallsBackToGet() async throws {
        #expect(Self.pattern(Self.router.match(method: "HEAD", path: "/items/9")) == "/items/:id")
        guard case .found = Self.router.match(method: "HEAD", path: "/healthz") else { Issue.record("HEAD /healthz"); return }
        guard case let .found(.async(handler, _), _, _) = Self.router.match(method: "HEAD", path: "/explicit") else {
            Issue.record("no route for HEAD /explicit"); return
        }
        guard case let .bytes(body) = try await handler(Request(method: "HEAD", target: "/explicit")).body else { return }
        #expect(String(decoding: body, as: UTF8.self) == "head route")
    }

    @Test("methods match case-sensitively")
    func methodCase() {
        guard case .methodNotAllowed = Self.router.match(method: "get", path: "/items/1") else { Issue.record("get matched GET"); return }
    }
}
