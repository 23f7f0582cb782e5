import Foundation
import HTTPClient
import Testing

@Suite("HTTPClient: requests and responses over loopback")
struct HTTPClientTests {
    @Test func getSendsHeadersAndReturnsStatusHeadersAndBody() async throws {
        let server = try ScriptedServer.responding { _ in
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Reply:  yes \r\nContent-Length: 5\r\n\r\nhello"
        }
        let client = HTTPClient()
        let response = try await client.execute(HTTPClientRequest(
            url: server.baseURL + "/hello/a%2Fb?x=1&y=%20", headers: [("X-Test", "abc"), ("X-Empty", ""), ("Accept", "application/fhir+json")]))

        #expect(response.status == 200)
        #expect(response.header("x-reply") == "yes")
        #expect(response.header("CONTENT-TYPE") == "text/plain")
        #expect(response.header("X-Missing") == nil)
        #expect(response.body == Array("hello".utf8))
        let seen = try #require(server.requests.first)
        #expect(seen.method == "GET")
        #expect(seen.target == "/hello/a%2Fb?x=1&y=%20")
        #expect(seen.header("X-Test") == "abc")
        #expect(seen.header("X-Empty") == "")
        #expect(seen.header("Accept") == "application/fhir+json")
        #expect(seen.header("User-Agent") == "smart-bff")
        #expect(seen.header("Expect") == nil)
    }

    @Test func postSendsTheBodyWithItsLength() async throws {
        let server = try ScriptedServer.responding { request in
            "HTTP/1.1 201 Created\r\nContent-Length: \(request.body.count)\r\n\r\n" + String(decoding: request.body, as: UTF8.self)
        }
        let client = HTTPClient()
        let body = Array((0..<150_000).map { UInt8(ascii: "a") + UInt8($0 % 26) })
        let response = try await client.execute(HTTPClientRequest(
            method: "POST", url: server.baseURL + "/token", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: body))

        #expect(response.status == 201)
        #expect(response.body == body)
        let seen = try #require(server.requests.first)
        #expect(seen.method == "POST")
        #expect(seen.header("Content-Length") == "150000")
        #expect(seen.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(seen.header("Expect") == nil)
        #expect(seen.body == body)
    }

    @Test(arguments: ["PUT", "POST", "DELETE"])
    func otherMethodsWithoutABody(method: String) async throws {
        let server = try ScriptedServer.responding { _ in "HTTP/1.1 204 No Content\r\n\r\n" }
        let client = HTTPClient()
        let response = try await client.execute(HTTPClientRequest(method: method, url: server.baseURL + "/x"))

        #expect(response.status == 204)
        #expect(response.body.isEmpty)
        let seen = try #require(server.requests.first)
        #expect(seen.method == method)
        #expect(seen.header("Content-Length") == (method == "DELETE" ? nil : "0"))
    }

    @Test func headReturnsTheHeadWithoutWaitingForABody() async throws {
        let server = try ScriptedServer.responding { request in
            request.method == "HEAD" ? "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nETag: \"v1\"\r\n\r\n"
                                     : "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        }
        var configuration = HTTPClient.Configuration()
        configuration.readTimeout = .seconds(120)
        let client = HTTPClient(configuration: configuration)
        let started = ContinuousClock.now
        let head = try await client.execute(HTTPClientRequest(method: "HEAD", url: server.baseURL + "/r"))
        #expect(ContinuousClock.now - started < .seconds(45)) // a body wait would last the 120 s read timeout
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == "1000")
        #expect(head.header("ETag") == "\"v1\"")
        #expect(head.body.isEmpty)
        // The next request gets its own answer, on a new connection: a response to HEAD ends
        // its connection (a body some servers send anyway would be read as the next answer).
        let next = try await client.execute(HTTPClientRequest(url: server.baseURL + "/r"))
        #expect(next.body == Array("ok".utf8))
        #expect(server.connectionCount == 2)
    }

    @Test func sequentialRequestsReuseOneKeepAliveConnection() async throws {
        let server = try ScriptedServer.responding { request in
            "HTTP/1.1 200 OK\r\nContent-Length: \(request.target.utf8.count)\r\n\r\n\(request.target)"
        }
        let client = HTTPClient()
        for i in 0..<25 {
            let response = try await client.execute(HTTPClientRequest(url: server.baseURL + "/n/\(i)"))
            #expect(response.body == Array("/n/\(i)".utf8))
        }
        #expect(server.requests.count == 25)
        #expect(server.connectionCount == 1)
    }

    @Test func chunkedResponseIsDecodedAndTrailersAreNotHeaders() async throws {
        let server = try ScriptedServer.responding { _ in
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
                + "5\r\nhello\r\n6;ext=1\r\n world\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: t\r\n\r\n"
        }
        let client = HTTPClient()
        for _ in 0..<2 {
            let response = try await client.execute(HTTPClientRequest(url: server.baseURL + "/c"))
            #expect(response.status == 200)
            #expect(response.body == Array("hello world0123456789abcdef".utf8))
            #expect(response.header("Transfer-Encoding") == "chunked")
            #expect(response.header("X-Trailer") == nil)
        }
        #expect(server.connectionCount == 1) // the chunked framing ended exactly
    }

    @Test func redirectsAreReturnedNotFollowed() async throws {
        let server = try ScriptedServer.responding { request in
            request.target == "/from" ? "HTTP/1.1 302 Found\r\nLocation: /to\r\nContent-Length: 0\r\n\r\n"
                                      : "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        }
        let client = HTTPClient()
        let response = try await client.execute(HTTPClientRequest(url: server.baseURL + "/from"))
        #expect(response.status == 302)
        #expect(response.header("Location") == "/to")
        #expect(server.requests.map(\.target) == ["/from"])
    }

    @Test func interimResponsesAreSkipped() async throws {
        let server = try ScriptedServer.responding { _ in
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nX-Final: 1\r\nContent-Length: 2\r\n\r\nok"
        }
        let client = HTTPClient()
        let response = try await client.execute(HTTPClientRequest(method: "POST", url: server.baseURL + "/", body: Array("x".utf8)))
        #expect(response.status == 200)
        #expect(response.header("Link") == nil)
        #expect(response.headers.map(\.name) == ["X-Final", "Content-Length"])
        #expect(response.body == Array("ok".utf8))

        let streamed = try await client.stream(HTTPClientRequest(url: server.baseURL + "/"))
        #expect(streamed.status == 200)
        #expect(streamed.header("Link") == nil)
        #expect(try await streamed.body.collect() == Array("ok".utf8))
    }

    @Test func foldedHeaderLinesAreJoined() async throws {
        let server = try ScriptedServer.responding { _ in
            "HTTP/1.1 200 OK\r\nX-Folded: one\r\n\ttwo\r\nContent-Length: 0\r\n\r\n"
        }
        let response = try await HTTPClient().execute(HTTPClientRequest(url: server.baseURL + "/"))
        #expect(response.header("X-Folded") == "one two")
    }

    @Test func hundredConcurrentRequestsAllSucceed() async throws {
        let server = try ScriptedServer.responding { request in
            usleep(2000) // keep requests overlapping
            return "HTTP/1.1 200 OK\r\nContent-Length: \(request.target.utf8.count)\r\n\r\n\(request.target)"
        }
        let client = HTTPClient()
        let bodies = try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
            for i in 0..<100 {
                group.addTask { (i, try await client.execute(HTTPClientRequest(url: server.baseURL + "/r/\(i)")).body) }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(bodies.count == 100)
        for i in 0..<100 { #expect(bodies[i] == Array("/r/\(i)".utf8)) }
        #expect(server.connectionCount > 1) // they really ran side by side
        #expect(server.connectionCount <= client.configuration.maxConnectionsPerHost)
    }
}
