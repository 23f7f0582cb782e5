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
        let blackHole = try await BlackHole()
        let server = try ScriptedServer.responding { _ in "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" }
        let resolver = Resolver()
        resolver.remember([blackHole.address, SocketAddress.numeric("127.0.0.1", port: server.port)!],
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
        withExtendedLifetime(blackHole) {}
    }

    /// A dual-stack name whose first address fails at once (refused: on loopback the refusal
    /// comes after EINPROGRESS, through SO_ERROR, as an unreachable IPv6 route's does) and
    /// whose last never answers: the last address has the rest of the connect timeout, not
    /// the first address's share of it, so the request fails as a timeout (504 at the
    /// proxy), once the connect timeout has passed, not as a connect failure half-way.
    @Test func theLastAddressHasTheRestOfTheConnectTimeout() async throws {
        let blackHole = try await BlackHole()
        let refusing = SocketAddress.numeric("127.0.0.1", port: try LoopbackSocket.unusedPort())!
        let resolver = Resolver()
        resolver.remember([refusing, blackHole.address], forHost: "refused-then-silent.test", port: 80)
        var configuration = HTTPClient.Configuration()
        configuration.connectTimeout = .seconds(4) // the first address's share: 2 s
        let client = HTTPClient(configuration: configuration, resolver: resolver)
        let started = ContinuousClock.now
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.execute(HTTPClientRequest(url: "http://refused-then-silent.test/x"))
        }
        #expect(error?.isTimeout == true, "\(String(reflecting: error))")
        // The timeout is the behaviour here: it may come late on a loaded machine, never early.
        #expect(ContinuousClock.now - started >= .seconds(3))
        withExtendedLifetime(blackHole) {}
    }
}

/// A loopback address that never answers a connection: a listener whose accept queue is
/// full, so the kernel drops further SYNs (as a black hole, or a broken route, does).
private final class BlackHole {
    let address: SocketAddress
    private let listener: Int32
    private var fillers: [Int32] = []

    init() async throws {
        let (fd, port) = try LoopbackSocket.listen(backlog: 0)
        listener = fd
        address = SocketAddress.numeric("127.0.0.1", port: port)!
        for _ in 0..<3 {
            let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            _ = address.withSockaddr { Glibc.connect(filler, $0, $1) }
            fillers.append(filler)
        }
        try await Task.sleep(for: .milliseconds(200)) // the handshakes the queue holds are done
    }

    deinit {
        fillers.forEach { close($0) }
        close(listener)
    }
}

private final class SentFlag: Sendable {
    private let flag = Atomic(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
}
