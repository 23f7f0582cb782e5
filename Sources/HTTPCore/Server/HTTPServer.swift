#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import Synchronization

/// smart-bff's HTTP/1.1 server: a listener shared by one `EventLoop` per core, each an epoll
/// set of non-blocking connections. Handlers run as Swift tasks; no socket call ever blocks
/// a thread of the cooperative pool.
public final class HTTPServer: @unchecked Sendable {
    // @unchecked: `loops`, `listenerFD` and `port` are written once in `start()` before any
    // other thread sees them (the listener is closed once, by the one `shutdown` that drains,
    // after every loop stopped watching it); the counters are atomics.
    public let configuration: ServerConfiguration
    /// Called once per I/O thread: each thread answers with its own application, so that
    /// the objects touched on every request (router, middleware, handler contexts) are not
    /// shared between cores, whose reference counting would contend for them.
    let makeApplication: @Sendable () -> HTTPApplication
    let logger: Logger
    private var loops: [EventLoop] = []
    private var listenerFD: Int32 = -1
    /// The bound port (useful with port 0).
    public private(set) var port = 0
    let inFlight = Atomic<Int>(0)
    private let nextLoop = Atomic<UInt>(0)
    private let openConnections = Atomic<Int>(0)
    private let drainingFlag = Atomic<Bool>(false)
    private let drainCutShort = Atomic<Bool>(false)
    private let stopped = Mutex<Bool>(false)
    /// When the last out-of-descriptors warning was logged.
    private let lastDescriptorWarning = Mutex<ContinuousClock.Instant?>(nil)
    /// When the last over-capacity warning was logged, and connections refused since.
    private let lastCapacityWarning = Mutex<(at: ContinuousClock.Instant?, refused: Int)>((nil, 0))
    private let stopSignal = DispatchSemaphore(value: 0)

    /// A server whose I/O threads each answer with an application made by `makeApplication`.
    public init(configuration: ServerConfiguration, makeApplication: @escaping @Sendable () -> HTTPApplication,
                logger: Logger = Logger(label: "smart-bff.http")) {
        self.configuration = configuration
        self.makeApplication = makeApplication
        self.logger = logger
    }

    /// A server whose I/O threads share one application.
    public convenience init(configuration: ServerConfiguration, application: HTTPApplication,
                            logger: Logger = Logger(label: "smart-bff.http")) {
        self.init(configuration: configuration, makeApplication: { application }, logger: logger)
    }

    /// Binds the listener and starts the I/O threads.
    public func start() throws(SocketError) {
        let (fd, boundPort) = try Socket.makeListener(host: configuration.host, port: configuration.port)
        listenerFD = fd
        port = boundPort
        for index in 0..<configuration.eventLoops {
            let loop = try EventLoop(application: makeApplication(), groupSize: configuration.eventLoops)
            loop.server = self
            loops.append(loop)
            loop.startAccepting(fd)
            loop.start(name: "http-io-\(index)")
        }
        logger.info("listening", metadata: ["http.host": .string(configuration.host), "http.port": .stringConvertible(port)])
    }

    /// True once shutdown has begun: no new connections; responses carry `Connection: close`.
    var isDraining: Bool { drainingFlag.load(ordering: .relaxed) }

    /// Open connections right now.
    public var connectionCount: Int { openConnections.load(ordering: .relaxed) }

    /// Stops accepting, lets requests in flight finish within `gracePeriod`, closes idle
    /// connections, then drops whatever is left and stops the I/O threads.
    public func shutdown(gracePeriod: Duration = .seconds(10)) async {
        guard !drainingFlag.exchange(true, ordering: .relaxed) else { await waitUntilStopped(); return }
        logger.info("draining", metadata: ["http.connections": .stringConvertible(connectionCount)])
        for loop in loops {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                loop.execute { loop.stopAccepting(); done.resume() }
            }
        }
        // No loop watches the listener now: closed, it refuses new connections at once (a
        // load balancer tries another instance) instead of completing their handshakes into
        // the backlog, where they would wait out the drain and then be reset.
        Glibc.close(listenerFD)
        let deadline = ContinuousClock.now + gracePeriod
        while connectionCount > 0 && ContinuousClock.now < deadline && !drainCutShort.load(ordering: .relaxed) {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for loop in loops {
            loop.execute {
                loop.forEachConnection { $0.abort() }
                loop.stop()
            }
        }
        // Blocking waits on threads of their own, never on the Dispatch global queue, whose
        // threads other blocking work (database connects) may all be holding.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread { [loops] in
                for loop in loops { loop.waitUntilStopped() }
                done.resume()
            }
        }
        logger.info("HTTP server stopped: connections closed")
        stopped.withLock { $0 = true }
        stopSignal.signal()
    }

    /// Ends a `shutdown`'s grace period now (an operator's second signal): the connections
    /// still open are closed within 20 ms, requests in flight on them cut off. Before a
    /// shutdown it makes the next one close its connections at once.
    public func endGracePeriod() {
        drainCutShort.store(true, ordering: .relaxed)
    }

    /// Suspends until `shutdown` has finished.
    public func waitUntilStopped() async {
        if stopped.withLock({ $0 }) { return }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread { [self] in
                stopSignal.wait()
                stopSignal.signal()
                done.resume()
            }
        }
    }

    // MARK: Called by event loops

    func acceptConnections(on loop: EventLoop, listener: Int32) {
        for _ in 0..<64 {
            guard !isDraining else { return }
            let fd: Int32
            switch Socket.accept(listener) {
            case let .connection(accepted): fd = accepted
            case .none: return
            case let .outOfDescriptors(code):
                outOfDescriptors(code, on: loop)
                return
            }
            if openConnections.add(1, ordering: .relaxed).newValue > configuration.maxConnections {
                openConnections.subtract(1, ordering: .relaxed)
                HTTPServer.refuseOverCapacity(fd)
                warnOverCapacity()
                continue
            }
            // Spread connections evenly: one wake-up may accept a whole burst, which would
            // otherwise leave every connection of the burst on one core.
            let target = loops[Int(nextLoop.add(1, ordering: .relaxed).oldValue % UInt(loops.count))]
            if target === loop {
                loop.add(Connection(fd: fd, loop: loop, server: self))
            } else {
                target.execute { [self] in target.add(Connection(fd: fd, loop: target, server: self)) }
            }
        }
    }

    /// No descriptor for a waiting connection: the listener, still readable, would wake the
    /// loop at once, again and again. It sleeps `acceptPause` instead (connections wait in
    /// the backlog, served once descriptors free up), with a warning at most every 10 s.
    private func outOfDescriptors(_ code: Int32, on loop: EventLoop) {
        loop.pauseAccepting(for: HTTPServer.acceptPause)
        let now = ContinuousClock.now
        let due = lastDescriptorWarning.withLock { last in
            guard last.map({ now - $0 >= .seconds(10) }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        logger.warning("out of file descriptors: accepting paused", metadata: [
            "error.detail": .string(String(cString: strerror(code))), "http.connections": .stringConvertible(connectionCount),
            "process.open_file_limit": .stringConvertible(OpenFileLimit.current?.soft ?? 0),
        ])
    }

    /// New connections are answered 503 at `maxConnections` (probes too): a warning at most
    /// every 10 s, with how many were refused since the last, so that the cause is in the log.
    private func warnOverCapacity() {
        let now = ContinuousClock.now
        let refused = lastCapacityWarning.withLock { last -> Int? in
            last.refused += 1
            guard last.at.map({ now - $0 >= .seconds(10) }) ?? true else { return nil }
            defer { last = (now, 0) }
            return last.refused
        }
        guard let refused else { return }
        logger.warning("connection limit reached: new connections are answered 503", metadata: [
            "http.connections": .stringConvertible(connectionCount), "http.max_connections": .stringConvertible(configuration.maxConnections),
            "http.refused_connections": .stringConvertible(refused),
        ])
    }

    /// How long accepting sleeps when no descriptor is left.
    static let acceptPause = 0.1

    func connectionClosed() {
        openConnections.subtract(1, ordering: .relaxed)
    }

    func tick(_ loop: EventLoop) {
        let now = loop.now
        let draining = isDraining
        loop.forEachConnection { $0.checkTimeouts(now: now, configuration: configuration, draining: draining) }
    }

    /// Answers a connection beyond `maxConnections` with 503 and closes it, without
    /// giving it any state.
    private static func refuseOverCapacity(_ fd: Int32) {
        Socket.writeAndClose(fd, overCapacityResponse)
    }

    private static let overCapacityResponse: [UInt8] = {
        let body = #"{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"Too many open connections."}"#
        return Array(("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\n"
            + "Retry-After: 1\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body).utf8)
    }()
}
