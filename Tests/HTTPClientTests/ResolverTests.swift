import BFFTesting
import Foundation
@testable import HTTPClient
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("HTTPClient: names and addresses")
struct ResolverTests {
    @Test func aLookedUpNameIsAnsweredFromTheCacheAfterwards() async throws {
        let resolver = Resolver()
        let first = await withCheckedContinuation { done in resolver.resolve("localhost", port: 80) { done.resume(returning: $0) } }
        #expect(try first.get().isEmpty == false)
        let answeredAtOnce = SentFlag()
        resolver.resolve("localhost", port: 80) { _ in answeredAtOnce.set() }
        #expect(answeredAtOnce.isSet) // before resolve returned: no thread, no getaddrinfo
    }

    /// A name with two addresses, the first of which never answers (its SYNs are dropped, as
    /// a black hole or a broken IPv6 route does): the second gets the request within the
    /// connect timeout instead of the whole request timing out.
    @Test func anAddressThatNeverAnswersGivesWayToTheNext() async throws {
        // A listener whose accept queue is full: the kernel drops further SYNs.
        let (blackHole, blackHolePort) = try LoopbackSocket.listen(backlog: 0)
        defer { close(blackHole) }
        var fillers: [Int32] = []
        defer { fillers.forEach { close($0) } }
        for _ in 0..<3 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            _ = SocketAddress.numeric("127.0.0.1", port: blackHolePort)!.withSockaddr { Glibc.connect(fd, $0, $1) }
            fillers.append(fd)
        }
        try await Task.sleep(for: .milliseconds(200)) // the handshakes the queue holds are done
        let server = try ScriptedServer.responding { _ in "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" }
        let resolver = Resolver()
        resolver.remember([SocketAddress.numeric("127.0.0.1", port: blackHolePort)!, SocketAddress.numeric("127.0.0.1", port: server.port)!],
                          forHost: "two-addresses.test", port: server.port)
        var configuration = HTTPClient.Configuration()
        configuration.connectTimeout = .seconds(4)
        let client = HTTPClient(configuration: configuration, resolver: resolver)
        // The first address gets 2 s of the 4; had it taken them all, the request would fail
        // with the connect timeout. (No clock check: under load, scheduling delay alone took
        // a run past 4 s on the test's side of the request.)
        let response = try await client.execute(HTTPClientRequest(url: "http://two-addresses.test:\(server.port)/x"))
        #expect(response.body == Array("ok".utf8))
        #expect(server.requests.map(\.target) == ["/x"])
    }
}

private final class SentFlag: Sendable {
    private let flag = Atomic(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
}
