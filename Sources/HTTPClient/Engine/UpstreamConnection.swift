#if canImport(Glibc)
import Glibc
#endif
internal import CLinux
import HTTPCore

/// One connection to an upstream (or through a proxy to it) on an event loop: resolving,
/// connecting (each address in turn), the proxy's `CONNECT` tunnel, the TLS handshake, then
/// one request at a time, and idle in its pool between requests.
///
/// Loop thread only (a name lookup's answer is posted back to it), hence `@unchecked
/// Sendable`. It reports to its `ClientLoop`, which decides what runs on it next; every call
/// to the owner is the last thing a method does with the exchange.
final class UpstreamConnection: EventLoopHandler, @unchecked Sendable {
    private enum Phase { case resolving, connecting, tunnelling, handshaking, open, closed }

    unowned let owner: ClientLoop
    let pool: HostPool
    /// The upstream this connection reaches, and the proxy it goes through.
    private let url: UpstreamURL
    private let proxy: ProxySettings.Proxy?
    private var phase = Phase.resolving
    private var fd: Int32 = -1
    private var addresses: [SocketAddress] = []
    private var nextAddress = 0
    private var lastConnectError = ""
    /// While connecting with more addresses to try: when this attempt gives way to the next
    /// (infinity for the last address).
    private(set) var attemptDeadline = Double.infinity
    private var tls: TLSSession?
    /// The exchange it carries (or is being opened for).
    private(set) var exchange: Exchange?
    private var outbound: [UInt8] = []
    private var written = 0
    private var tunnelReply: [UInt8] = []
    /// A TLS read needs the socket writable first, or a write needs it readable.
    private var readWantsWrite = false
    private var writeWantsRead = false
    /// What epoll watches for now (0: not watched).
    private var watched: UInt32 = 0
    /// Requests started on this connection.
    private var requestsStarted = 0
    /// When it went idle, on the loop's clock.
    private(set) var idleSince = 0.0

    init(owner: ClientLoop, pool: HostPool, for exchange: Exchange) {
        self.owner = owner
        self.pool = pool
        url = exchange.url
        proxy = exchange.proxy
        self.exchange = exchange
        exchange.connection = self
    }

    var isOpen: Bool { phase == .open }

    // MARK: - Setting up

    /// Starts resolving and connecting; the owner hears back through `connectionReady` or
    /// `connectionFailed`.
    func open() {
        let host = proxy?.host ?? url.host
        let port = proxy?.port ?? url.port
        if let address = SocketAddress.numeric(host, port: port) {
            addresses = [address]
            connectNext()
            return
        }
        let loop = owner.loop
        owner.resolver.resolve(host, port: port) { [self] result in
            loop.execute { [self] in resolved(result) }
        }
    }

    private func resolved(_ result: Result<[SocketAddress], HTTPClientError>) {
        guard phase == .resolving else { return } // given up meanwhile
        switch result {
        case let .success(found):
            addresses = found
            connectNext()
        case let .failure(error):
            fail(error)
        }
    }

    /// Tries the next address; fails once none is left.
    private func connectNext() {
        while nextAddress < addresses.count {
            let address = addresses[nextAddress]
            nextAddress += 1
            let socketFD = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard socketFD >= 0 else {
                lastConnectError = String(cString: strerror(errno))
                continue
            }
            var one: Int32 = 1
            setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            fd = socketFD
            let result = address.withSockaddr { Glibc.connect(socketFD, $0, $1) }
            if result == 0 {
                connected()
                return
            }
            if errno == EINPROGRESS {
                phase = .connecting
                watch(EPOLLOUT.rawValue)
                // Set for every attempt, never left from an earlier one (which may have failed
                // early, refused or unreachable). An address that never answers (a dropped
                // SYN, a broken IPv6 route) must leave time for the others: each but the last
                // gets its share of the connect timeout. The last has what remains of the
                // whole, which the exchange's connect deadline ends, as a timeout.
                if nextAddress < addresses.count {
                    attemptDeadline = owner.loop.now + max(0.25, owner.connectTimeout / Double(addresses.count))
                    owner.arm(attemptDeadline)
                } else {
                    attemptDeadline = .infinity
                }
                return
            }
            lastConnectError = String(cString: strerror(errno))
            closeSocket()
        }
        let name = proxy.map { "the proxy \($0.key)" } ?? url.hostAndPort
        fail(.connectFailed("could not connect to \(name): \(lastConnectError.isEmpty ? "no address" : lastConnectError)"))
    }

    /// Loop thread: gives up the current address for the next one once its share of the
    /// connect timeout has passed.
    func checkAttempt(now: Double) {
        guard phase == .connecting, now >= attemptDeadline else { return }
        attemptDeadline = .infinity
        lastConnectError = "no answer within \(Int(owner.connectTimeout / Double(addresses.count) * 1000)) ms"
        closeSocket()
        connectNext()
    }

    private func finishConnecting() {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        if error == 0 {
            // Connected, or still connecting: an event meant for an earlier socket with the
            // same number (closed and reused within one epoll batch) can arrive here.
            var peer = sockaddr_storage()
            var peerLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let connectedNow = withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &peerLength) }
            } == 0
            guard connectedNow else { return } // EPOLLOUT comes when it is done
        }
        guard error == 0 else {
            lastConnectError = String(cString: strerror(error))
            closeSocket()
            connectNext()
            return
        }
        connected()
    }

    private func connected() {
        attemptDeadline = .infinity
        if let proxy, url.isSecure {
            phase = .tunnelling
            var head = "CONNECT \(url.hostAndPort) HTTP/1.1\r\nHost: \(url.hostAndPort)\r\n"
            if let authorization = proxy.authorization { head += "Proxy-Authorization: \(authorization)\r\n" }
            outbound = Array((head + "\r\n").utf8)
            written = 0
            tunnel()
        } else {
            secure()
        }
    }

    /// The CONNECT request out, the proxy's answer in; a 2xx opens the tunnel. The answer is
    /// judged once its head is complete (lines may end in LF alone), by the response
    /// parser's rules for a status line and fields, and also when the proxy closes the
    /// connection right after it (a 407 with `Connection: close`): its status is what the
    /// error then reports.
    private func tunnel() {
        if written < outbound.count {
            switch writePlain() {
            case .failed(let reason), .closed(let reason):
                return fail(.connectFailed("the proxy closed the connection: \(reason)"))
            case .progress: break
            }
            if written < outbound.count { return watch(EPOLLOUT.rawValue) }
        }
        let buffer = owner.scratch
        var ended = false
        while true {
            // One byte at a time would be exact; the head is small and nothing may follow it.
            let n = recv(fd, buffer.baseAddress, buffer.count, 0)
            if n > 0 {
                tunnelReply.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[..<n]))
                guard tunnelReply.count <= 16 * 1024 else { return fail(.connectFailed("the proxy's answer is too long")) }
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            ended = true // closed or reset: what came before still says why
            break
        }
        let judged = tunnelReply.withUnsafeBytes { bytes in
            Result { () throws(HTTPClientError) in try ResponseParser.statusOfHead(in: bytes) }
        }
        let head: (status: Int, length: Int)?
        switch judged {
        case let .success(found): head = found
        case let .failure(error): return fail(.connectFailed("the proxy's answer is not HTTP: \(error.message)"))
        }
        guard let head else {
            guard !ended else { return fail(.connectFailed("the proxy closed the connection before the tunnel was open")) }
            return watch(EPOLLIN.rawValue)
        }
        guard (200..<300).contains(head.status) else { return fail(.connectFailed("the proxy refused the tunnel: HTTP \(head.status)")) }
        guard head.length == tunnelReply.count else { return fail(.connectFailed("the proxy sent bytes after opening the tunnel")) }
        guard !ended else { return fail(.connectFailed("the proxy closed the connection as it opened the tunnel")) }
        tunnelReply = []
        secure()
    }

    /// TLS for https upstreams, then the connection is ready.
    private func secure() {
        guard url.isSecure else { return ready() }
        do {
            tls = try owner.tls.makeSession(fd: fd, host: url.host, isIPAddress: url.isIPAddress, key: url.hostAndPort)
        } catch {
            return fail(error)
        }
        phase = .handshaking
        handshake()
    }

    private func handshake() {
        switch tls!.handshake() {
        case .done: ready()
        case .wantRead: watch(EPOLLIN.rawValue)
        case .wantWrite: watch(EPOLLOUT.rawValue)
        case let .failed(reason): fail(.tls(reason))
        case .closed: fail(.tls("the server closed the connection during the TLS handshake"))
        }
    }

    private func ready() {
        phase = .open
        owner.connectionReady(self)
    }

    // MARK: - Requests

    /// Sends `exchange`'s request on this open connection.
    func start(_ exchange: Exchange) {
        self.exchange = exchange
        exchange.connection = self
        outbound = exchange.bytes
        written = 0
        requestsStarted += 1
        pump()
    }

    /// Writes what is pending, reads what arrived, and watches for what comes next.
    func pump() {
        guard phase == .open, let exchange else { return }
        if written < outbound.count {
            switch write() {
            case .progress:
                // All sent just now: the answer cannot be here yet, epoll will say when it is
                // (a read now would almost always find nothing: one system call wasted).
                if written == outbound.count && !exchange.parser.hasReceivedAnything { return updateWatch() }
            case .closed, .failed:
                // The upstream may have answered before it closed (413, say): read first.
                written = outbound.count
                outbound = []
            }
        }
        if !exchange.paused {
            guard read(for: exchange) else { return } // the exchange ended: the owner took over
        }
        updateWatch()
    }

    /// Reads and parses until the socket has nothing more, the consumer is behind, or the
    /// response ended. Returns false when the exchange ended here.
    private func read(for exchange: Exchange) -> Bool {
        let buffer = owner.scratch
        readWantsWrite = false
        while true {
            switch receive(into: buffer) {
            case let .bytes(n):
                let used: Int
                do {
                    used = try exchange.receive(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
                } catch {
                    fail(error)
                    return false
                }
                exchange.deadline = owner.loop.now + owner.readTimeout
                if exchange.parser.isComplete {
                    // Bytes after the response (in this read, or already read ahead by
                    // OpenSSL, where epoll cannot see them) were never asked for: no reuse.
                    let extra = used < n || (tls?.hasBufferedInput ?? false)
                    complete(exchange, reusable: !extra && exchange.parser.allowsReuse && written == outbound.count)
                    return false
                }
                if exchange.paused {
                    // The consumer is behind: nothing more is read until it catches up. It
                    // may take the stall timeout between pieces (the sweep moves the deadline
                    // on from each take), however long catching up takes.
                    exchange.deadline = owner.loop.now + owner.stallTimeout
                    owner.arm(exchange.deadline) // it may be shorter than the read timeout
                    break
                }
                if n < buffer.count && !(tls?.hasBufferedInput ?? false) { break } // drained: epoll says when more comes
                continue
            case .wouldBlock:
                break
            case .wantWrite:
                readWantsWrite = true
            case let .closed(cleanly):
                endOfInput(exchange, cleanly: cleanly)
                return false
            case let .failed(error):
                fail(error)
                return false
            }
            break
        }
        exchange.deliverHeadIfReady()
        return true
    }

    /// The upstream closed the connection while `exchange` was on it.
    private func endOfInput(_ exchange: Exchange, cleanly: Bool) {
        if !exchange.parser.hasReceivedAnything && requestsStarted > 1 && exchange.isIdempotent && !exchange.retried {
            // A kept-alive connection the upstream closed just as it was reused.
            close()
            owner.retry(exchange, from: self)
            return
        }
        do throws(HTTPClientError) {
            if !cleanly && exchange.parser.isDelimitedByClose {
                // A body that only the end of the connection delimits, cut off by a reset or
                // without TLS's close_notify: it may have been ended early.
                throw HTTPClientError.truncated(tls != nil ? "the TLS connection ended without close_notify"
                                                           : "the connection was reset before the end of the body")
            }
            try exchange.finishAtEnd()
        } catch {
            fail(error)
            return
        }
        complete(exchange, reusable: false)
    }

    private func complete(_ exchange: Exchange, reusable: Bool) {
        if let tls, requestsStarted == 1, !tls.isResumed {
            owner.tls.remember(tls, for: url.hostAndPort) // its ticket has come with the answer, if at all
        }
        self.exchange = nil
        exchange.finish(.success(()))
        owner.exchangeCompleted(exchange, on: self, reusable: reusable)
    }

    /// Ends the connection and the exchange on it with `error`.
    func fail(_ error: HTTPClientError) {
        let exchange = self.exchange
        self.exchange = nil
        close()
        owner.connectionFailed(self, exchange: exchange, error: error)
    }

    /// Drops the exchange (cancelled, or timed out) and closes: the rest of its response
    /// would still be on the connection.
    func abandon() {
        exchange = nil
        close()
    }

    /// Stops reading for the exchange (its consumer is behind), or resumes.
    func updateWatch() {
        guard phase == .open, fd >= 0 else { return }
        // Idle or busy alike (no epoll_ctl between requests): readable, or closed by the upstream.
        guard let exchange else { return watch(EPOLLIN.rawValue | EPOLLRDHUP.rawValue) }
        var events: UInt32 = exchange.paused && !writeWantsRead ? 0 : EPOLLIN.rawValue | EPOLLRDHUP.rawValue
        if written < outbound.count && !writeWantsRead || readWantsWrite { events |= EPOLLOUT.rawValue }
        watch(events)
    }

    /// Loop thread: the connection goes back to its pool.
    func becameIdle(now: Double) {
        idleSince = now
        outbound = []
        written = 0
        updateWatch()
    }

    // MARK: - Events

    func handle(fd: Int32, events: UInt32) {
        switch phase {
        case .connecting: finishConnecting()
        case .tunnelling: tunnel()
        case .handshaking: handshake()
        case .open where exchange != nil: pump()
        case .open: idleEvent()
        case .resolving, .closed: break
        }
    }

    /// Something happened on an idle connection: a TLS session ticket (read and kept), or the
    /// upstream closing it (or sending what nobody asked for): then it goes.
    private func idleEvent() {
        if hasNothingUnread() { return }
        close()
        owner.idleConnectionClosed(self)
    }

    /// Whether an idle connection can carry another request: nothing has arrived on it since
    /// its last response (neither the upstream's close nor bytes nobody asked for; a TLS
    /// session ticket is read and kept). Checked before each reuse, because epoll may not
    /// have told yet: an event can wait further down the batch being handled, and bytes
    /// OpenSSL has read ahead never show there.
    func hasNothingUnread() -> Bool {
        guard phase == .open, exchange == nil else { return false }
        if tls?.hasBufferedInput != true {
            var byte: UInt8 = 0
            let n = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return true }
            guard n > 0, tls != nil else { return false } // closed, failed, or plain bytes unasked for
        }
        // TLS: records to read (OpenSSL reads them all); only handshake messages (tickets) may
        // leave it usable, and no half record may wait.
        if case .wouldBlock = receive(into: owner.scratch) { return tls?.hasBufferedInput != true }
        return false
    }

    // MARK: - I/O

    private enum ReadOutcome {
        case bytes(Int)
        case wouldBlock
        case wantWrite
        case closed(cleanly: Bool)
        case failed(HTTPClientError)
    }

    private func receive(into buffer: UnsafeMutableRawBufferPointer) -> ReadOutcome {
        if let tls {
            switch tls.read(into: buffer) {
            case let .done(n): return .bytes(n)
            case .wantRead: return .wouldBlock
            case .wantWrite: return .wantWrite
            case let .closed(cleanly): return .closed(cleanly: cleanly)
            case let .failed(reason): return .failed(.tls(reason))
            }
        }
        while true {
            let n = recv(fd, buffer.baseAddress, buffer.count, 0)
            if n > 0 { return .bytes(n) }
            if n == 0 { return .closed(cleanly: true) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case ECONNRESET, EPIPE: return .closed(cleanly: false)
            default: return .failed(.other("reading from the upstream failed: \(String(cString: strerror(errno)))"))
            }
        }
    }

    private enum WriteOutcome {
        case progress
        case closed(String)
        case failed(String)
    }

    private func write() -> WriteOutcome {
        guard let tls else { return writePlain() }
        writeWantsRead = false
        while written < outbound.count {
            let outcome = outbound.withUnsafeBytes { tls.write(UnsafeRawBufferPointer(rebasing: $0[written...])) }
            switch outcome {
            case let .done(n): written += n
            case .wantWrite: return .progress
            case .wantRead: // goes on once the socket is readable (not writable: that would spin)
                writeWantsRead = true
                return .progress
            case .closed: return .closed("the connection closed")
            case let .failed(reason): return .failed(reason)
            }
        }
        return .progress
    }

    private func writePlain() -> WriteOutcome {
        while written < outbound.count {
            let n = outbound.withUnsafeBytes { send(fd, $0.baseAddress! + written, $0.count - written, Int32(MSG_NOSIGNAL)) }
            if n >= 0 {
                written += n
                continue
            }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .progress
            case ECONNRESET, EPIPE: return .closed(String(cString: strerror(errno)))
            default: return .failed(String(cString: strerror(errno)))
            }
        }
        return .progress
    }

    private func watch(_ events: UInt32) {
        guard events != watched else { return }
        if events == 0 {
            owner.loop.unwatch(fd)
        } else {
            owner.loop.watch(fd, events: events, handler: self)
        }
        watched = events
    }

    /// Closes the connection (sending TLS close_notify when it was open); idempotent.
    func close() {
        guard phase != .closed else { return }
        if phase == .open { tls?.close() }
        phase = .closed
        tls = nil
        closeSocket()
    }

    private func closeSocket() {
        guard fd >= 0 else { return }
        if watched != 0 { owner.loop.unwatch(fd) }
        watched = 0
        Glibc.close(fd)
        fd = -1
    }
}
