import Foundation
import HTTPCore

/// The connections to one upstream (scheme, host, port and proxy) on one event loop.
final class HostPool {
    /// Open connections waiting for a request, the most recently used last.
    var idle: [UpstreamConnection] = []
    /// Connections counted against the per-host limit: being set up, busy or idle.
    var open = 0
    /// Exchanges waiting for a connection, oldest first.
    var waiting: [Exchange] = []
    /// Exchanges holding a connection (being set up, busy), by `Exchange.share`.
    var busyByShare: [String: Int] = [:]
}

/// What an `HTTPClient`'s loops share: TLS context, resolver threads and proxy settings.
struct ClientShared: Sendable {
    let tls: TLSContext
    let resolver: Resolver
    let proxies: ProxySettings
}

/// An `HTTPClient` on one event loop: its pooled connections, the exchanges in flight and
/// their timeouts. Requests made on a loop's thread (a server's request handlers) run here
/// without leaving it; the client's own loop serves every other caller.
///
/// Everything runs on `loop`'s thread, except `makeExchange` (the caller's thread) and
/// `submit`, `cancel` and `resume`, which post to it. Hence `@unchecked Sendable`.
final class ClientLoop: @unchecked Sendable {
    /// Idle connections older than this are closed: servers and load balancers drop idle
    /// connections after a while, often without a word (AWS ALB at 60 s).
    static let maxIdleSeconds = 50.0

    /// The loop (strong: a body stream may outlive the client and still ask to resume).
    let loop: EventLoop
    let tls: TLSContext
    let resolver: Resolver
    private let proxies: ProxySettings
    private let maxConnectionsPerHost: Int
    /// What one share's requests may hold of a host's connections on this loop: all but
    /// the reserved ones.
    private let maxConnectionsPerShare: Int
    let connectTimeout: Double
    let readTimeout: Double
    let stallTimeout: Double
    private let totalTimeout: Double
    /// `HTTPClient.Configuration.maxIdleForUnrepeatable`, in seconds.
    private let maxIdleForUnrepeatable: Double
    private let maxBodyBytes: Int
    /// Where connections read into; loop thread only.
    let scratch: UnsafeMutableRawBufferPointer
    private var pools: [PoolKey: HostPool] = [:]
    private var active: [ObjectIdentifier: Exchange] = [:]
    private var timer: EventLoopTimer!
    private var closed = false
    private var dispatching = false
    private var dispatchLater: [HostPool] = []

    /// A client on `loop`, one of `groupSize` loops that share the configured connection
    /// limits evenly (at least one connection each). Call on the loop's thread, or before the loop starts.
    init(loop: EventLoop, configuration: HTTPClient.Configuration, groupSize: Int, shared: ClientShared) {
        self.loop = loop
        tls = shared.tls
        resolver = shared.resolver
        proxies = shared.proxies
        maxConnectionsPerHost = max(1, configuration.maxConnectionsPerHost / max(1, groupSize))
        let reserved = maxConnectionsPerHost < 2 || configuration.reservedConnectionsPerHost <= 0
            ? 0 : max(1, configuration.reservedConnectionsPerHost / max(1, groupSize))
        maxConnectionsPerShare = max(1, maxConnectionsPerHost - reserved)
        connectTimeout = Double(configuration.connectTimeout.nanoseconds) / 1e9
        readTimeout = Double(configuration.readTimeout.nanoseconds) / 1e9
        stallTimeout = Double(configuration.stallTimeout.nanoseconds) / 1e9
        totalTimeout = Double(configuration.totalTimeout.nanoseconds) / 1e9
        maxIdleForUnrepeatable = Double(configuration.maxIdleForUnrepeatable.nanoseconds) / 1e9
        maxBodyBytes = configuration.maxResponseBodyBytes
        scratch = .allocate(byteCount: 64 * 1024, alignment: 16)
        timer = loop.makeTimer { [unowned self] in sweep() }
    }

    deinit { scratch.deallocate() }

    // MARK: - Any thread

    /// Validates `request` and builds its exchange (on the caller's thread).
    func makeExchange(_ request: HTTPClientRequest, streaming: Bool) throws(HTTPClientError) -> Exchange {
        try request.validate()
        let url = try UpstreamURL(request.url)
        let exchange = Exchange(request: request, url: url, proxy: try proxies.proxy(for: url),
                                maxBodyBytes: streaming ? .max : min(maxBodyBytes, request.maxBodyBytes ?? .max))
        if streaming { exchange.makeBodyBuffer(owner: self) }
        return exchange
    }

    /// Starts `exchange` (its `delivery` must be set): at once on the loop's own thread (a
    /// request handler's call), else posted to it.
    func submit(_ exchange: Exchange) {
        if loop.inLoop {
            add(exchange)
        } else {
            loop.execute { [self] in add(exchange) }
        }
    }

    /// Stops `exchange` with `HTTPClientError.cancelled`, whether or not it has started.
    func cancel(_ exchange: Exchange) {
        exchange.cancelRequested.store(true, ordering: .releasing)
        loop.execute { [self] in
            if active[ObjectIdentifier(exchange)] === exchange { end(exchange, .cancelled()) }
        }
    }

    /// The consumer of `exchange`'s streaming body reads it whole: the answer must be complete
    /// within the total timeout from the submission, as a buffered one.
    func awaitWhole(_ exchange: Exchange) {
        loop.execute { [self] in
            guard active[ObjectIdentifier(exchange)] === exchange else { return }
            exchange.totalDeadline = exchange.wholeDeadline
            arm(exchange.totalDeadline)
        }
    }

    /// Reads on for an exchange paused because its consumer was behind.
    func resume(_ exchange: Exchange) {
        loop.execute { [self] in
            guard active[ObjectIdentifier(exchange)] === exchange, exchange.paused else { return }
            exchange.paused = false
            exchange.deadline = loop.now + readTimeout
            arm(exchange.deadline)
            exchange.connection?.pump()
        }
    }

    // MARK: - Loop thread

    /// The client goes: exchanges still running fail as cancelled, and connections close.
    func close() {
        guard !closed else { return }
        closed = true
        for exchange in Array(active.values) { end(exchange, .cancelled("the HTTP client has shut down")) }
        for pool in pools.values {
            for connection in pool.idle { connection.close() }
            pool.idle = []
        }
        loop.removeTimer(timer)
    }

    private func add(_ exchange: Exchange) {
        if closed || exchange.cancelRequested.load(ordering: .acquiring) {
            exchange.finish(.failure(closed ? .cancelled("the HTTP client has shut down") : .cancelled()))
            return
        }
        active[ObjectIdentifier(exchange)] = exchange
        exchange.deadline = loop.now + connectTimeout + readTimeout
        arm(exchange.deadline)
        // A buffered exchange, and a streaming one until its head arrives (then the head is
        // handed over, and the body has the read and stall timeouts unless it is collected).
        exchange.wholeDeadline = loop.now + totalTimeout
        exchange.totalDeadline = exchange.wholeDeadline
        arm(exchange.totalDeadline)
        let pool = pools[exchange.poolKey] ?? {
            let made = HostPool()
            pools[exchange.poolKey] = made
            return made
        }()
        pool.waiting.append(exchange)
        dispatch(pool)
    }

    /// Gives waiting exchanges idle connections, or new ones while under the limit.
    /// Connections report back from inside it at times (a refusal, a quick answer): then
    /// their pool's turn comes after this one, not inside it.
    private func dispatch(_ pool: HostPool) {
        guard !closed else { return }
        guard !dispatching else { return dispatchLater.append(pool) }
        dispatching = true
        defer { dispatching = false }
        var next: HostPool? = pool
        while let pool = next {
            while let index = nextEligible(in: pool), !closed {
                let exchange = pool.waiting[index]
                // A retry goes on a new connection when it can: others may be as stale.
                let preferNew = exchange.retried && pool.open < maxConnectionsPerHost
                let freshEnough = { (connection: UpstreamConnection) in
                    exchange.isIdempotent || connection.idleSince + self.maxIdleForUnrepeatable >= self.loop.now
                }
                if !preferNew, let connection = pool.idle.last, freshEnough(connection) {
                    pool.idle.removeLast()
                    guard connection.hasNothingUnread() else {
                        connection.close()
                        pool.open -= 1
                        continue
                    }
                    pool.waiting.remove(at: index)
                    takeShare(exchange, in: pool)
                    start(exchange, on: connection)
                } else if pool.open >= maxConnectionsPerHost, !preferNew, let stale = pool.idle.first {
                    // Every connection allowed is open, and the idle ones too stale for this
                    // request: the stalest makes room for a new one.
                    pool.idle.removeFirst()
                    stale.close()
                    pool.open -= 1
                } else if pool.open < maxConnectionsPerHost {
                    pool.waiting.remove(at: index)
                    takeShare(exchange, in: pool)
                    pool.open += 1
                    exchange.deadline = loop.now + connectTimeout
                    arm(exchange.deadline)
                    UpstreamConnection(owner: self, pool: pool, for: exchange).open()
                } else {
                    break
                }
            }
            next = dispatchLater.popLast()
        }
    }

    /// The first waiting exchange whose share is under its limit (nearly always the first).
    private func nextEligible(in pool: HostPool) -> Int? {
        if pool.busyByShare.isEmpty { return pool.waiting.isEmpty ? nil : 0 }
        return pool.waiting.firstIndex { $0.share.map { pool.busyByShare[$0, default: 0] < maxConnectionsPerShare } ?? true }
    }

    private func takeShare(_ exchange: Exchange, in pool: HostPool) {
        guard let share = exchange.share else { return }
        pool.busyByShare[share, default: 0] += 1
        exchange.holdsShare = true
    }

    /// `exchange` no longer holds a connection (ended, failed, or back in the queue).
    private func releaseShare(_ exchange: Exchange, in pool: HostPool) {
        guard exchange.holdsShare, let share = exchange.share else { return }
        exchange.holdsShare = false
        if let busy = pool.busyByShare[share], busy > 1 {
            pool.busyByShare[share] = busy - 1
        } else {
            pool.busyByShare[share] = nil
        }
    }

    /// A new connection is set up: its exchange goes out on it.
    func connectionReady(_ connection: UpstreamConnection) {
        guard let exchange = connection.exchange else { return }
        start(exchange, on: connection)
    }

    /// Sends `exchange` on `connection`; the read timeout runs from now.
    private func start(_ exchange: Exchange, on connection: UpstreamConnection) {
        exchange.deadline = loop.now + readTimeout
        arm(exchange.deadline)
        connection.start(exchange)
    }

    /// `exchange` ended well on `connection`, which is open still when `reusable`.
    func exchangeCompleted(_ exchange: Exchange, on connection: UpstreamConnection, reusable: Bool) {
        active[ObjectIdentifier(exchange)] = nil
        let pool = connection.pool
        releaseShare(exchange, in: pool)
        if reusable && !closed {
            connection.becameIdle(now: loop.now)
            pool.idle.append(connection)
            arm(loop.now + ClientLoop.maxIdleSeconds)
        } else {
            connection.close()
            pool.open -= 1
        }
        dispatch(pool)
    }

    /// `connection` failed (and closed), taking `exchange` with it.
    func connectionFailed(_ connection: UpstreamConnection, exchange: Exchange?, error: HTTPClientError) {
        connection.pool.open -= 1
        if let exchange {
            releaseShare(exchange, in: connection.pool)
            active[ObjectIdentifier(exchange)] = nil
            exchange.finish(.failure(error))
        }
        dispatch(connection.pool)
    }

    /// A reused connection was closed before it answered: `exchange` goes again, first in line.
    func retry(_ exchange: Exchange, from connection: UpstreamConnection) {
        let pool = connection.pool
        pool.open -= 1
        releaseShare(exchange, in: pool)
        exchange.retried = true
        exchange.connection = nil
        exchange.restart()
        exchange.deadline = loop.now + connectTimeout + readTimeout
        arm(exchange.deadline)
        pool.waiting.insert(exchange, at: 0)
        dispatch(pool)
    }

    /// An idle connection was closed by its upstream.
    func idleConnectionClosed(_ connection: UpstreamConnection) {
        let pool = connection.pool
        pool.idle.removeAll { $0 === connection }
        pool.open -= 1
        dispatch(pool)
    }

    /// Stops `exchange` before it completed. Its connection closes, never goes back to the
    /// pool: the rest of the response would still be on it.
    private func end(_ exchange: Exchange, _ error: HTTPClientError) {
        active[ObjectIdentifier(exchange)] = nil
        guard let pool = pools[exchange.poolKey] else { return exchange.finish(.failure(error)) }
        if let connection = exchange.connection {
            connection.abandon()
            pool.open -= 1
            releaseShare(exchange, in: pool)
        } else {
            pool.waiting.removeAll { $0 === exchange }
        }
        exchange.finish(.failure(error))
        dispatch(pool)
    }

    /// Makes sure the timer runs by `deadline`.
    func arm(_ deadline: Double) {
        if timer.deadline.map({ deadline < $0 }) ?? true { timer.deadline = deadline }
    }

    /// Times out exchanges that waited too long (a paused one: whose consumer took nothing
    /// for the stall timeout), closes connections idle too long, and sets the timer for the next deadline.
    private func sweep() {
        let now = loop.now
        var next = Double.infinity
        for exchange in Array(active.values) {
            guard exchange.deadline <= now || exchange.totalDeadline <= now else {
                if let connection = exchange.connection, !connection.isOpen {
                    connection.checkAttempt(now: now) // may fail the exchange (no address left)
                    next = min(next, connection.attemptDeadline)
                }
                next = min(next, exchange.deadline, exchange.totalDeadline)
                continue
            }
            if exchange.totalDeadline <= now {
                let part = exchange.parser.head == nil ? "response head" : "answer"
                end(exchange, .timedOut("the upstream's \(part) was not complete within the total timeout (\(Int(totalTimeout.rounded(.up))) s)"))
                continue
            }
            if exchange.paused {
                // Stalled only if it took nothing for the stall timeout: a consumer that still
                // takes pieces, only slower than they come, is not. The deadline was set at
                // the pause; a take since moves it on (one from before the pause is older than
                // the pause, so it cannot).
                if let lastTake = exchange.bodyBuffer?.lastTake, lastTake + stallTimeout > now {
                    exchange.deadline = lastTake + stallTimeout
                    next = min(next, exchange.deadline)
                    continue
                }
                // Its connection closes and frees the slot; the consumer, whenever it reads
                // next, learns at once, not after the megabyte the transfer can no longer complete.
                exchange.bodyBuffer?.dropBuffered()
                end(exchange, .stalled())
                continue
            }
            if exchange.connection == nil, let share = exchange.share, let pool = pools[exchange.poolKey],
               pool.busyByShare[share, default: 0] >= maxConnectionsPerShare {
                end(exchange, .shareBusy())
                continue
            }
            let reason = switch exchange.connection.map(\.isOpen) {
            case nil: "no connection to the upstream came free in time (every one allowed to it was busy)"
            case false?: "could not connect within the connect timeout"
            case true?: "no data from the upstream within the read timeout"
            }
            end(exchange, .timedOut(reason))
        }
        for pool in pools.values {
            for connection in pool.idle {
                let expiry = connection.idleSince + ClientLoop.maxIdleSeconds
                if expiry <= now {
                    connection.close()
                    pool.idle.removeAll { $0 === connection }
                    pool.open -= 1
                } else {
                    next = min(next, expiry)
                }
            }
        }
        // Something armed during the sweep (a connection given to a waiting exchange) may be due sooner.
        if next < .infinity { timer.deadline = min(timer.deadline ?? .infinity, next) }
    }
}
