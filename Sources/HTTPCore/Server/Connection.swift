#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// One client connection, owned by one `EventLoop` and touched only on its thread.
/// Requests on a connection are answered strictly one after another, so pipelined
/// responses leave in request order.
final class Connection: @unchecked Sendable {
    // @unchecked: every mutable property is used only on `loop`'s thread; other threads
    // hand work over with `loop.execute`.
    enum Phase {
        /// Waiting for (more of) a request.
        case reading
        /// A handler is working on a request.
        case responding
        /// A streamed body is being produced.
        case streaming
        /// The final bytes are being written; then the connection closes.
        case closing
        case closed
    }

    let fd: Int32
    // unowned(unsafe): the loop and the server outlive every connection (the loop closes
    // its connections before it exits), and plain `unowned` costs a check on every use.
    unowned(unsafe) let loop: EventLoop
    unowned(unsafe) let server: HTTPServer
    private(set) var phase: Phase = .reading
    private var parser: RequestParser
    private var input: [UInt8] = []
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var requestsServed = 0
    private var keepAliveAfterResponse = true
    /// When the request now being read must be complete (slow-loris bound).
    private var readDeadline: Double?
    private var idleSince: Double
    private var lastWriteProgress: Double
    private var registeredEvents = EPOLLIN.rawValue | EPOLLRDHUP.rawValue
    private var peerClosed = false
    /// Resumed when a streaming producer may write more.
    private var drainWaiter: CheckedContinuation<Void, any Error>?
    let remoteAddress: String

    static let highWater = 256 * 1024
    static let maxBufferedInput = 64 * 1024

    init(fd: Int32, loop: EventLoop, server: HTTPServer) {
        self.fd = fd
        self.loop = loop
        self.server = server
        self.parser = RequestParser(limits: server.configuration.limits)
        self.idleSince = loop.now
        self.lastWriteProgress = loop.now
        self.remoteAddress = Socket.peerAddress(fd)
    }

    /// Handles readiness reported by epoll.
    func handle(events: UInt32) {
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 && events & EPOLLIN.rawValue == 0 {
            abort()
            return
        }
        if events & EPOLLOUT.rawValue != 0 { flush() }
        if events & EPOLLIN.rawValue != 0 || events & EPOLLRDHUP.rawValue != 0 { readAvailable() }
    }

    private func readAvailable() {
        guard phase != .closed else { return }
        if phase != .reading && input.count > Connection.maxBufferedInput {
            // Enough is buffered behind the request in progress; let the kernel hold the rest.
            updateInterest()
            return
        }
        switch Socket.read(fd, into: loop.scratch) {
        case .wouldBlock:
            return
        case .closed:
            peerClosed = true
            if phase == .reading || phase == .closing { abort() } else { updateInterest() }
            return
        case let .bytes(n):
            input.append(contentsOf: UnsafeRawBufferPointer(rebasing: loop.scratch[0..<n]))
            if phase == .reading {
                if readDeadline == nil { readDeadline = loop.now + server.configuration.requestReadTimeout }
                processInput()
            }
        }
    }

    /// Parses and answers every complete request in `input`, in order, as long as the
    /// answers are immediate; stops at the first one that needs a task.
    private func processInput() {
        while phase == .reading && !input.isEmpty {
            let outcome = input.withUnsafeBufferPointer { parser.parse($0) }
            switch outcome {
            case let .needMoreData(consumed):
                input.removeFirst(consumed)
                if input.isEmpty && parser.isAtMessageStart { readDeadline = nil }
            case let .continueRequested(consumed):
                input.removeFirst(consumed)
                output.append(ResponseHead.continue100)
                continue
            case let .failed(error):
                input.removeAll()
                refuse(error)
                flush()
                return
            case let .complete(parsed, consumed):
                input.removeFirst(consumed)
                readDeadline = input.isEmpty ? nil : loop.now + server.configuration.requestReadTimeout
                dispatch(parsed)
                continue
            }
            break
        }
        flush()
    }

    private func dispatch(_ parsed: ParsedRequest) {
        requestsServed += 1
        keepAliveAfterResponse = parsed.keepAlive && !server.isDraining
            && requestsServed < server.configuration.maxRequestsPerConnection
        let application = loop.application! // connections live on server loops only
        var request = Request(method: parsed.method, target: parsed.target, version: parsed.version,
                              headers: parsed.headers, body: parsed.body, logger: application.logger)
        request.remoteAddress = remoteAddress
        phase = .responding
        let isHead = parsed.method == "HEAD"
        switch application.dispatch(request) {
        case let .ready(response):
            send(response, version: parsed.version, isHead: isHead)
        case let .pending(work):
            server.inFlight.add(1, ordering: .relaxed)
            let loop = self.loop
            Task(executorPreference: loop) {
                let response = await work()
                // The task prefers the loop, so it normally resumes on the loop thread and
                // answers from there; a hop through `execute` cost an allocation and a turn.
                if loop.inLoop {
                    self.finish(with: response, version: parsed.version, isHead: isHead)
                } else {
                    loop.execute { [self] in finish(with: response, version: parsed.version, isHead: isHead) }
                }
            }
        }
    }

    /// Loop thread: sends the response a handler produced, then reads on (or flushes).
    private func finish(with response: Response, version: HTTPVersion, isHead: Bool) {
        server.inFlight.subtract(1, ordering: .relaxed)
        guard phase == .responding else {
            abandon(response.body)
            return
        }
        send(response, version: version, isHead: isHead)
        if phase == .reading { processInput() } else { flush() }
    }

    /// A streamed body whose connection has gone: its producer still runs, once, with a
    /// writer that refuses every write (see `ResponseBody.stream`).
    private func abandon(_ body: ResponseBody) {
        guard case let .stream(_, producer) = body else { return }
        Task(executorPreference: loop) { try? await producer(RefusingBodyWriter()) }
    }

    /// Queues `response` for writing.
    private func send(_ response: Response, version: HTTPVersion, isHead: Bool) {
        if server.isDraining { keepAliveAfterResponse = false }
        let bodyless = isHead || response.status.code == 204 || response.status.code == 304 || response.status.code < 200
        switch response.body {
        case let .bytes(body):
            let framing: ResponseHead.Framing = (response.status.code == 204 || response.status.code < 200) ? .none : .length(body.count)
            ResponseHead.write(response, version: version, framing: framing, keepAlive: keepAliveAfterResponse,
                               date: loop.dateHeader, into: &output)
            if !bodyless { output.append(contentsOf: body) }
            finishResponse()
        case let .stream(length, producer):
            let framing: ResponseHead.Framing
            if bodyless {
                framing = length.map { .length($0) } ?? .none
            } else if let length {
                framing = .length(length)
            } else if version == .http11 {
                framing = .chunked
            } else {
                framing = .closeDelimited
                keepAliveAfterResponse = false
            }
            ResponseHead.write(response, version: version, framing: framing, keepAlive: keepAliveAfterResponse,
                               date: loop.dateHeader, into: &output)
            phase = .streaming
            startStream(producer, framing: framing, discard: bodyless)
        }
    }

    private func finishResponse() {
        idleSince = loop.now
        if keepAliveAfterResponse && !peerClosed {
            phase = .reading
        } else {
            phase = .closing
        }
    }

    private func startStream(_ producer: @escaping @Sendable (any BodyWriter) async throws -> Void,
                             framing: ResponseHead.Framing, discard: Bool) {
        let writer = StreamWriter(connection: self, chunked: { if case .chunked = framing { return true }; return false }(),
                                  discard: discard)
        server.inFlight.add(1, ordering: .relaxed)
        flush()
        let loop = self.loop
        Task(executorPreference: loop) {
            let failed: Bool
            do { try await producer(writer); failed = false } catch { failed = true }
            loop.execute { [self] in
                server.inFlight.subtract(1, ordering: .relaxed)
                endStream(writer: writer, failed: failed, framing: framing)
            }
        }
    }

    private func endStream(writer: StreamWriter, failed: Bool, framing: ResponseHead.Framing) {
        guard phase == .streaming else { return }
        if failed {
            abort()
            return
        }
        if case let .length(expected) = framing, !writer.discard, writer.bytesWritten != expected {
            abort() // a wrong length must never look like a complete message
            return
        }
        if case .chunked = framing, !writer.discard { output.append(ResponseHead.lastChunk) }
        finishResponse()
        if phase == .reading { processInput() } else { flush() }
    }

    /// Called on the loop thread by `StreamWriter`.
    func appendStreamed(_ bytes: [UInt8], chunked: Bool, waiter: CheckedContinuation<Void, any Error>) {
        guard phase == .streaming else {
            waiter.resume(throwing: ConnectionClosedError())
            return
        }
        if chunked {
            ResponseHead.appendHex(bytes.count, to: &output)
            output.append(ResponseHead.crlf)
            output.append(contentsOf: bytes)
            output.append(ResponseHead.crlf)
        } else {
            output.append(contentsOf: bytes)
        }
        flush()
        if phase == .closed {
            waiter.resume(throwing: ConnectionClosedError())
        } else if output.count - outputOffset < Connection.highWater {
            waiter.resume()
        } else {
            drainWaiter = waiter
        }
    }

    private func refuse(_ error: ParseError) {
        keepAliveAfterResponse = false
        let response = HTTPError(error.status, detail: error.reason).response
        ResponseHead.write(response, version: .http11, framing: .length(bodyLength(response)), keepAlive: false,
                           date: loop.dateHeader, into: &output)
        if case let .bytes(body) = response.body { output.append(contentsOf: body) }
        phase = .closing
    }

    private func bodyLength(_ response: Response) -> Int {
        if case let .bytes(body) = response.body { return body.count }
        return 0
    }

    /// Writes as much pending output as the socket takes; closes when a closing
    /// connection has written everything.
    func flush() {
        while outputOffset < output.count {
            let result = output.withUnsafeBytes { Socket.write(fd, UnsafeRawBufferPointer(rebasing: $0[outputOffset...])) }
            switch result {
            case let .bytes(n):
                outputOffset += n
                lastWriteProgress = loop.now
            case .wouldBlock:
                updateInterest()
                return
            case .closed:
                abort()
                return
            }
        }
        output.removeAll(keepingCapacity: output.capacity <= 64 * 1024)
        outputOffset = 0
        if let waiter = drainWaiter {
            drainWaiter = nil
            waiter.resume()
        }
        if phase == .closing {
            close()
            return
        }
        updateInterest()
    }

    /// Tells epoll what this connection waits for now: reads unless the peer has closed or
    /// enough is buffered behind a request in progress; writes while output is pending.
    private func updateInterest() {
        guard phase != .closed else { return }
        var events: UInt32 = 0
        let readPaused = phase == .closing || (phase != .reading && input.count > Connection.maxBufferedInput)
        if !peerClosed && !readPaused { events |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        if outputOffset < output.count { events |= EPOLLOUT.rawValue }
        if events != registeredEvents {
            registeredEvents = events
            loop.modify(fd, events: events)
        }
    }

    /// Applies the read, idle and write timeouts; called by the loop's timer.
    func checkTimeouts(now: Double, configuration: ServerConfiguration, draining: Bool) {
        switch phase {
        case .reading:
            if let deadline = readDeadline, now > deadline {
                refuse(ParseError(.requestTimeout, "request not received in time"))
                flush()
            } else if readDeadline == nil && (draining || now - idleSince > configuration.idleTimeout) {
                close()
            }
        case .closing, .streaming, .responding:
            if outputOffset < output.count && now - lastWriteProgress > configuration.writeTimeout { abort() }
        case .closed:
            break
        }
    }

    /// Closes after a graceful end of the exchange.
    func close() {
        guard phase != .closed else { return }
        phase = .closed
        shutdown(fd, Int32(SHUT_WR))
        loop.remove(self)
        failWaiter()
    }

    /// Drops the connection at once (errors, truncated streams, forced shutdown).
    func abort() {
        guard phase != .closed else { return }
        phase = .closed
        var lingerOff = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lingerOff, socklen_t(MemoryLayout<linger>.size))
        loop.remove(self)
        failWaiter()
    }

    private func failWaiter() {
        if let waiter = drainWaiter {
            drainWaiter = nil
            waiter.resume(throwing: ConnectionClosedError())
        }
    }

    var isIdle: Bool { phase == .reading && readDeadline == nil }

}

/// Thrown to a streaming producer when its client has gone.
public struct ConnectionClosedError: Error, Sendable {}

/// The writer of a body whose connection has gone.
private struct RefusingBodyWriter: BodyWriter {
    func write(_ bytes: [UInt8]) async throws { throw ConnectionClosedError() }
}

/// The `BodyWriter` a streaming producer writes through.
final class StreamWriter: BodyWriter, @unchecked Sendable {
    // @unchecked: `bytesWritten` is touched only on the connection's loop thread.
    let connection: Connection
    let chunked: Bool
    let discard: Bool
    var bytesWritten = 0

    init(connection: Connection, chunked: Bool, discard: Bool) {
        self.connection = connection
        self.chunked = chunked
        self.discard = discard
    }

    func write(_ bytes: [UInt8]) async throws {
        if discard || bytes.isEmpty { return }
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
            connection.loop.execute { [self] in
                bytesWritten += bytes.count
                connection.appendStreamed(bytes, chunked: chunked, waiter: waiter)
            }
        }
    }
}
