import Foundation
import Logging
@testable import HTTPCore
import Synchronization
import Testing

/// HTTPApplication: problem+json errors (RFC 9457), middleware order, request ids.
@Suite("application: errors, middleware, request ids")
struct HTTPApplicationTests {
    struct Secret: Error { let token = "tok-secret-123" }

    static func app(middleware: [any Middleware] = []) -> HTTPApplication {
        var router = Router()
        router.get("/items/:id") { r in .text("item " + (r.pathParameters["id"] ?? "")) }
        router.post("/items") { _ in .text("created", status: .created) }
        router.get("/boom") { _ in throw Secret() }
        router.get("/stray-cancellation") { _ in throw CancellationError() }
        router.onImmediate("GET", "/boom-now") { _ in throw Secret() }
        router.get("/teapot") { _ in
            throw HTTPError(HTTPStatus(code: 418, reason: "I'm a teapot"), detail: "short and stout", headers: ["X-Pot": "1"])
        }
        var quiet = Logger(label: "test")
        quiet.logLevel = .critical  // the 500 test logs "unhandled error" by design
        return HTTPApplication(router: router, middleware: middleware, logger: quiet)
    }

    static func body(_ r: Response) -> String {
        if case let .bytes(b) = r.body { return String(decoding: b, as: UTF8.self) }
        return ""
    }

    /// The problem document's type, title and status.
    static func problem(_ r: Response) throws -> (type: String?, title: String?, status: Double?) {
        let json = try JSONSerialization.jsonObject(with: Data(body(r).utf8)) as? [String: Any] ?? [:]
        return (json["type"] as? String, json["title"] as? String, json["status"] as? Double)
    }

    @Test("path parameters reach the handler")
    func parametersReachHandler() async {
        #expect(Self.body(await Self.app().respond(to: Request(method: "GET", target: "/items/42?x=1"))) == "item 42")
    }

    @Test("404 is application/problem+json with type, title and status")
    func notFoundProblem() async throws {
        let r = await Self.app().respond(to: Request(method: "GET", target: "/nope"))
        #expect(r.status.code == 404)
        #expect(r.headers["Content-Type"] == "application/problem+json")
        let p = try Self.problem(r)
        #expect(p.type == "about:blank" && p.title == "Not Found" && p.status == 404)
    }

    @Test("405 is a problem with Allow listing the route's methods")
    func methodNotAllowedProblem() async throws {
        let r = await Self.app().respond(to: Request(method: "DELETE", target: "/items/1"))
        #expect(r.status.code == 405)
        #expect(r.headers["Allow"] == "GET, HEAD")
        #expect(r.headers["Content-Type"] == "application/problem+json")
        #expect(try Self.problem(r).status == 405)
    }

    @Test("HEAD is answered by the GET route")
    func headAnsweredByGet() async {
        let r = await Self.app().respond(to: Request(method: "HEAD", target: "/items/7"))
        #expect(r.status.code == 200 && Self.body(r) == "item 7")
    }

    @Test("an error thrown by a handler is a 500 problem that does not reveal it")
    func unknownErrorIs500() async throws {
        for target in ["/boom", "/boom-now"] {
            let r = await Self.app().respond(to: Request(method: "GET", target: target))
            #expect(r.status.code == 500)
            #expect(r.headers["Content-Type"] == "application/problem+json")
            #expect(!Self.body(r).contains("tok-secret") && !Self.body(r).contains("Secret"))
            #expect(try Self.problem(r).status == 500)
        }
    }

    @Test("a CancellationError from a handler whose task was not cancelled is a 500, not the 499 of a client gone")
    func strayCancellationIs500() async throws {
        let r = await Self.app().respond(to: Request(method: "GET", target: "/stray-cancellation"))
        #expect(r.status.code == 500)
        let cancelled = Task { await Self.app().respond(to: Request(method: "GET", target: "/stray-cancellation")) }
        cancelled.cancel()
        #expect(await cancelled.value.status.code == 499)
    }

    @Test("an HTTPError is answered with its status, detail and headers")
    func httpErrorMapped() async throws {
        let r = await Self.app().respond(to: Request(method: "GET", target: "/teapot"))
        #expect(r.status.code == 418)
        #expect(r.headers["X-Pot"] == "1" && r.headers["Cache-Control"] == "no-store")
        let p = try Self.problem(r)
        #expect(p.title == "I'm a teapot" && p.status == 418 && Self.body(r).contains("short and stout"))
    }

    @Test("middleware prepares in order and finishes in reverse; a prepared response skips the handler")
    func middlewareOrder() async {
        let log = Mutex<[String]>([])
        struct Step: Middleware {
            let name: String
            let log: @Sendable (String) -> Void
            var answer: Bool = false
            func prepare(_ request: inout Request) throws -> Response? {
                log("prepare " + name)
                request.headers.add("X-Seen", name)
                return answer ? .text("short") : nil
            }
            func finish(_ request: Request, _ response: inout Response) {
                log("finish " + name)
                response.headers.add("X-Trail", name + ":" + request.headers.values(for: "X-Seen").joined(separator: ","))
            }
        }
        let record: @Sendable (String) -> Void = { entry in log.withLock { $0.append(entry) } }
        let app = Self.app(middleware: [Step(name: "a", log: record), Step(name: "b", log: record)])
        let r = await app.respond(to: Request(method: "GET", target: "/items/1"))
        #expect(log.withLock { $0 } == ["prepare a", "prepare b", "finish b", "finish a"])
        #expect(r.headers.values(for: "X-Trail") == ["b:a,b", "a:a,b"])

        log.withLock { $0 = [] }
        let short = Self.app(middleware: [Step(name: "a", log: record), Step(name: "b", log: record, answer: true), Step(name: "c", log: record)])
        let s = await short.respond(to: Request(method: "GET", target: "/items/1"))
        #expect(Self.body(s) == "short")
        #expect(log.withLock { $0 } == ["prepare a", "prepare b", "finish c", "finish b", "finish a"])
    }

    @Test("X-Request-ID: a plain caller id is echoed; an unsafe or over-long one is replaced")
    func requestID() async {
        let app = Self.app()
        let plain = await app.respond(to: Request(method: "GET", target: "/items/1", headers: ["X-Request-ID": "abc-123_x.y"]))
        #expect(plain.headers["X-Request-ID"] == "abc-123_x.y")
        for unsafe in ["a b<script>", "x\u{7F}", String(repeating: "a", count: 65), "", "id\r\nSet-Cookie: x"] {
            let r = await app.respond(to: Request(method: "GET", target: "/items/1", headers: ["X-Request-ID": unsafe]))
            let id = r.headers["X-Request-ID"] ?? ""
            #expect(id != unsafe && !id.isEmpty && id.utf8.allSatisfy { ByteClass.requestID.contains($0) })
        }
        let a = await app.respond(to: Request(method: "GET", target: "/items/1"))
        let b = await app.respond(to: Request(method: "GET", target: "/items/1"))
        #expect(a.headers["X-Request-ID"] != b.headers["X-Request-ID"])
    }

    @Test("generated request ids: the process's random prefix, then a counter in hex, through 64 bits")
    func generatedRequestIDs() throws {
        let generator = RequestID.Generator()
        let ids = (0..<300).map { _ in generator.next() }
        let prefix = String(ids[0].prefix(9))
        #expect(prefix.utf8.count == 9 && prefix.hasSuffix("-") && prefix.dropLast().allSatisfy(\.isHexDigit))
        for (n, id) in ids.enumerated() {
            #expect(id == prefix + String(n + 1, radix: 16), "\(id)")
        }
        #expect(RequestID.Generator.id(prefix: prefix, counter: .max) == prefix + "ffffffffffffffff")
        #expect(RequestID.Generator.id(prefix: prefix, counter: 0x10) == prefix + "10")
    }
}
