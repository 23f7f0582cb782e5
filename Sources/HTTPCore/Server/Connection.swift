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
        /// The response is out and the write side shut; the client's unread bytes (a refused
        /// body, requests after the last one answered) are read and dropped until it closes or
        /// `lingerSeconds` pass. Closing with them unread would reset the connection, and a
        /// reset can destroy the response before the client has read it (RFC 9112 §9.6).
        case lingering
        case closed
    }

    let fd: Int32
    // unowned(unsafe): the loop and the server outlive every connection (the loop closes
    // its connections before it exits), and plain `unowned` costs a check on every use.
    unowned(unsafe) let loop: EventLoop
    unowned(unsafe) let server: HTTPServer
    private(set) var phase: Phase = .reading
    private var parser: RequestParser
    private var input = InputBuffer()
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var requestsServed = 0
    private var keepAliveAfterResponse = true
    /// When the request now being read must be complete (slow-loris bound).
    private var readDeadline: Double?
    private var idleSince: Double
    /// Since when pending output has waited for the socket without any of it being written.
    private var writeStalledSince: Double?
    /// A request was refused: the client may still be sending what follows it.
    private var lingerOnClose = false
    private var lingerDeadline = 0.0
    private var registeredEvents = EPOLLIN.rawValue | EPOLLRDHUP.rawValue
    private var peerClosed = false
    /// Resumed when a streaming producer may write more.
    private var drainWaiter: CheckedContinuation<Void, any Error>?
    /// The writer of the body now streaming: only it writes into this response. (A writer
    /// kept past its producer's end must never write into a later response on this
    /// connection, which a load balancer may carry for another user.)
    private var streamWriter: StreamWriter?
    /// The request in progress is on a route that gives up on a client gone
    /// (`Router.on(_:_:cancelledWhenClientLeaves:_:)`).
    private var cancelledWhenClientLeaves = false
    /// Then: the task answering it, or producing its streamed body, cancelled should the
    /// client leave first.
    private var cancellableHandler: Task<Void, Never>?
    /// The request in progress was given up before it started (its client had closed):
    /// its answer is not sent, and the connection closes.
    private var answerGoesNowhere = false
    let remoteAddress: String

    /// Output waiting for the socket beyond which a streaming producer waits until the client
    /// has read more.
    static let highWater = 256 * 1024
    /// The most output storage a connection keeps between responses.
    static let idleOutputCapacity = 16 * 1024
    /// Output waiting for the socket beyond which pipelined requests wait unparsed until the
    /// client has read more. Small: a client that pipelines requests and reads nothing (an
    /// attacker with many connections) makes the server hold this much per connection, not
    /// `highWater`; one that reads loses nothing.
    static let pipelineHighWater = 32 * 1024
    /// Input read ahead of the request in progress (or of answers waiting for the client)
    /// at most; the kernel holds the rest.
    static let maxBufferedInput = 16 * 1024
    static let lingerSeconds = 5.0

    init(fd: Int32, loop: EventLoop, server: HTTPServer) {
        self.fd = fd
        self.loop = loop
        self.server = server
        self.parser = RequestParser(limits: server.configuration.limits)
        self.idleSince = loop.now
        self.remoteAddress = Socket.peerAddress(fd)
    }

    /// Handles readiness reported by epoll.
    func handle(events: UInt32) {
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 && events & EPOLLIN.rawValue == 0 {
            clientLeft()
            return
        }
        if events & EPOLLOUT.rawValue != 0 {
            flush()
            // Pipelined requests waited for the client to read; it has.
            if phase == .reading && (!input.isEmpty || peerClosed) && !outputBacklogged { processInput() }
        }
        if events & EPOLLIN.rawValue != 0 || events & EPOLLRDHUP.rawValue != 0 { readAvailable() }
    }

    /// Output not yet taken by the socket.
    private var pendingOutput: Int { output.count - outputOffset }

    /// The client is not reading its responses fast enough: no more requests are answered
    /// until it does, so that a client pipelining requests without reading cannot make the
    /// server hold their responses without limit.
    private var outputBacklogged: Bool { pendingOutput >= Connection.pipelineHighWater }

    private func readAvailable() {
        guard phase != .closed else { return }
        if phase == .lingering {
            discardInput()
            return
        }
        // Behind a request in progress, or answers the client has not read, only so much is
        // read ahead; the kernel holds the rest.
        let readingAhead = phase != .reading || outputBacklogged
        if readingAhead && input.count >= Connection.maxBufferedInput {
            updateInterest()
            return
        }
        let room = readingAhead ? min(loop.scratch.count, Connection.maxBufferedInput - input.count) : loop.scratch.count
        switch Socket.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: loop.scratch[0..<room])) {
        case .wouldBlock:
            return
        case .closed:
            // Possibly only the client's sending side: what it asked for is still answered,
            // unless its route gives up on a client that has gone.
            peerClosed = true
            if phase == .reading {
                processInput()
            } else if phase == .responding, let handler = cancellableHandler {
                // Given up; answers before it may still wait in `output` or the kernel: the
                // connection closes once they are written (`finish`), not with a reset.
                handler.cancel()
                cancellableHandler = nil
                answerGoesNowhere = true
                updateInterest()
            } else if phase == .streaming && cancellableHandler != nil {
                clientLeft() // the stream cannot end whole now: a reset, as for any cut-off stream
            } else {
                updateInterest()
            }
            return
        case let .bytes(n):
            input.append(contentsOf: UnsafeRawBufferPointer(rebasing: loop.scratch[0..<n]))
            if phase == .reading {
                if readDeadline == nil { readDeadline = loop.now + server.configuration.requestReadTimeout }
                processInput()
            }
        }
    }

    /// Answers every complete request in `input`, in order, as long as the answers are
    /// immediate; stops at the first one that needs a task, or while the client is behind in
    /// reading. Once the client has closed its side and everything it sent is answered, the
    /// connection closes after the last byte is written. A request it left incomplete, which
    /// can never be completed now, is dropped: the answers before it still go out whole.
    private func processInput() {
        while true {
            guard answerBufferedRequests() else { return }
            // Requests, or the close after the client's, wait for the client to read.
            let deferred = outputBacklogged
            if phase == .reading && peerClosed && !deferred {
                input.removeAll()
                phase = .closing
            }
            flush()
            // When the socket took the backlog at once, no event would bring back what
            // waited for it: go on now.
            guard deferred && phase == .reading && !outputBacklogged else { return }
        }
    }

    /// Parses and answers requests until one needs a task, more bytes are needed, or the
    /// output is backlogged. False when a malformed request was refused (and flushed).
    private func answerBufferedRequests() -> Bool {
        while phase == .reading && !input.isEmpty && !outputBacklogged {
            let outcome = input.withUnsafeBufferPointer { parser.parse($0) }
            switch outcome {
            case let .needMoreData(consumed):
                input.removeFirst(consumed)
                if input.isEmpty && parser.isAtMessageStart {
                    readDeadline = nil
                } else if readDeadline == nil {
                    // Part of a request, perhaps sent while the one before was answered: its
                    // time runs from now, as the server reads again.
                    readDeadline = loop.now + server.configuration.requestReadTimeout
                }
                return true
            case let .continueRequested(consumed):
                input.removeFirst(consumed)
                output.append(ResponseHead.continue100)
            case let .failed(error):
                input.removeAll()
                refuse(error)
                flush()
                return false
            case let .complete(parsed, consumed):
                input.removeFirst(consumed)
                // The next request's time runs once the server reads again (`.needMoreData`),
                // not while this one is answered.
                readDeadline = nil
                dispatch(parsed)
            }
        }
        return true
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
        cancelledWhenClientLeaves = false
        answerGoesNowhere = false
        switch application.dispatch(request) {
        case let .ready(response):
            send(response, version: parsed.version, isHead: isHead)
        case let .pending(work, cancellable):
            cancelledWhenClientLeaves = cancellable
            server.inFlight.add(1, ordering: .relaxed)
            let loop = self.loop
            let task = Task(executorPreference: loop) {
                let response = await work()
                // The task prefers the loop, so it normally resumes on the loop thread and
                // answers from there; a hop through `execute` cost an allocation and a turn.
                if loop.inLoop {
                    self.finish(with: response, version: parsed.version, isHead: isHead)
                } else {
                    loop.execute { [self] in finish(with: response, version: parsed.version, isHead: isHead) }
                }
            }
            guard cancellable else { return }
            if peerClosed {
                // The client closed before this request's turn came (it was pipelined behind
                // another): given up at once. Its answer goes nowhere, and once the answers
                // before it are written the connection closes.
                task.cancel()
                answerGoesNowhere = true
            } else {
                cancellableHandler = task // the task starts on a later turn of this thread
            }
        }
    }

    /// Loop thread: sends the response a handler produced, then reads on (or flushes).
    private func finish(with response: Response, version: HTTPVersion, isHead: Bool) {
        server.inFlight.subtract(1, ordering: .relaxed)
        cancellableHandler = nil
        guard phase == .responding, !answerGoesNowhere else {
            abandon(response.body)
            if phase == .responding {
                phase = .closing
                flush()
            }
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
        let code = response.status.code
        // None on a 1xx or 204 (RFC 9110 §8.6: never), nor on a 304: it would have to be that
        // of the 200, unknown here.
        let lengthless = code == 204 || code == 304 || code < 200
        let bodyless = isHead || lengthless
        switch response.body {
        case let .bytes(body):
            let framing: ResponseHead.Framing = lengthless ? .none : .length(body.count)
            ResponseHead.write(response, version: version, framing: framing, keepAlive: keepAliveAfterResponse,
                               date: loop.dateHeader, into: &output)
            if !bodyless { output.append(contentsOf: body) }
            finishResponse()
        case let .stream(length, producer):
            let framing: ResponseHead.Framing
            if bodyless {
                framing = lengthless ? .none : length.map { .length($0) } ?? .none
            } else if let length {
                framing = .length(length)
            } else if version == .http11 && !response.endsAtClose {
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
        // A client that has closed its side may still have pipelined requests to answer;
        // `processInput` closes once they are.
        phase = keepAliveAfterResponse ? .reading : .closing
    }

    private func startStream(_ producer: @escaping @Sendable (any BodyWriter) async throws -> Void,
                             framing: ResponseHead.Framing, discard: Bool) {
        var declaredLength: Int?
        if case let .length(length) = framing { declaredLength = length }
        let writer = StreamWriter(connection: self, chunked: { if case .chunked = framing { return true }; return false }(),
                                  declaredLength: declaredLength, discard: discard)
        streamWriter = writer
        server.inFlight.add(1, ordering: .relaxed)
        flush()
        let loop = self.loop
        let task = Task(executorPreference: loop) {
            let failed: Bool
            do { try await producer(writer); failed = false } catch { failed = true }
            loop.execute { [self] in
                server.inFlight.subtract(1, ordering: .relaxed)
                endStream(writer: writer, failed: failed, framing: framing)
            }
        }
        if cancelledWhenClientLeaves {
            // (Only a client gone can have closed the connection during the flush above.)
            if phase == .streaming { cancellableHandler = task } else if phase == .closed { task.cancel() }
        }
    }

    private func endStream(writer: StreamWriter, failed: Bool, framing: ResponseHead.Framing) {
        guard writer === streamWriter else { return }
        streamWriter = nil // (the writer holds the connection: no cycle is left behind)
        cancellableHandler = nil
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

    /// Called on the loop thread by `StreamWriter`, once `writer.bytesWritten` counts `bytes`.
    func appendStreamed(_ bytes: [UInt8], from writer: StreamWriter, waiter: CheckedContinuation<Void, any Error>) {
        guard phase == .streaming, writer === streamWriter else {
            waiter.resume(throwing: ConnectionClosedError())
            return
        }
        if let declared = writer.declaredLength, writer.bytesWritten > declared {
            // Bytes beyond the declared length must never reach the client, which would take
            // them for the start of its next response.
            abort()
            waiter.resume(throwing: ConnectionClosedError())
            return
        }
        if writer.chunked {
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
        loop.application?.refused(error.status, reason: error.reason, peer: remoteAddress)
        keepAliveAfterResponse = false
        lingerOnClose = true
        let response = HTTPError(error.status, detail: error.reason).response
        ResponseHead.write(response, version: .http11, framing: .length(bodyLength(response)), keepAlive: false,
                           date: loop.dateHeader, into: &output)
        // No content in any response to HEAD (RFC 9110 §9.3.2); the length says what a GET's would be.
        if parser.requestMethod != "HEAD", case let .bytes(body) = response.body { output.append(contentsOf: body) }
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
                writeStalledSince = nil
            case .wouldBlock:
                if writeStalledSince == nil { writeStalledSince = loop.now }
                updateInterest()
                return
            case .closed:
                clientLeft()
                return
            }
        }
        // A stream's pieces reuse up to 64 KiB (as before); between responses a connection keeps
        // 16 KiB at most, so that thousands idle after a large answer do not each keep its size.
        output.removeAll(keepingCapacity: output.capacity <= (streamWriter == nil ? Connection.idleOutputCapacity : 64 * 1024))
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
        let readPaused = phase == .closing
            || ((phase != .reading || outputBacklogged) && input.count >= Connection.maxBufferedInput)
        if !peerClosed && !readPaused { events |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        if outputOffset < output.count { events |= EPOLLOUT.rawValue }
        if events != registeredEvents {
            registeredEvents = events
            loop.modify(fd, events: events)
        }
    }

    /// How long the connection may wait for a request's first byte: the keep-alive idle
    /// timeout once it has served a request; before that, only the request read timeout, so
    /// that connections that never send anything cannot hold the server's slots for long.
    private func idleLimit(_ configuration: ServerConfiguration) -> Double {
        requestsServed > 0 ? configuration.idleTimeout : min(configuration.idleTimeout, configuration.requestReadTimeout)
    }

    /// Applies the read, idle and write timeouts; called by the loop's timer.
    func checkTimeouts(now: Double, configuration: ServerConfiguration, draining: Bool) {
        if let stalled = writeStalledSince, now - stalled > configuration.writeTimeout {
            abort()
            return
        }
        switch phase {
        case .reading:
            guard !outputBacklogged else { return } // the write timeout governs
            if let deadline = readDeadline, now > deadline {
                refuse(ParseError(.requestTimeout, "request not received in time"))
                flush()
            } else if readDeadline == nil && pendingOutput == 0 && (draining || now - idleSince > idleLimit(configuration)) {
                close()
            }
        case .lingering:
            if now > lingerDeadline { endLingering() }
        case .closing, .streaming, .responding, .closed:
            break
        }
    }

    /// Closes after a graceful end of the exchange (all output written); lingers first when
    /// the client may still be sending.
    func close() {
        guard phase != .closed && phase != .lingering else { return }
        shutdown(fd, Int32(SHUT_WR))
        failWaiter()
        if !peerClosed && (lingerOnClose || !input.isEmpty) {
            phase = .lingering
            lingerDeadline = loop.now + Connection.lingerSeconds
            input.removeAll()
            updateInterest()
            return
        }
        phase = .closed
        loop.remove(self)
    }

    /// Lingering: reads and drops what the client sends; its close ends the connection.
    private func discardInput() {
        for _ in 0..<16 {
            switch Socket.read(fd, into: loop.scratch) {
            case .wouldBlock: return
            case .bytes: continue
            case .closed: endLingering(); return
            }
        }
    }

    private func endLingering() {
        phase = .closed
        loop.remove(self)
    }

    /// The client has closed or reset the connection, or a write found it gone: a handler
    /// whose route gives up on a client gone is cancelled. (Not so when the server drops a
    /// connection itself, a forced shutdown say: the handler's work is not the client's to end.)
    private func clientLeft() {
        cancellableHandler?.cancel()
        cancellableHandler = nil
        abort()
    }

    /// Drops the connection at once (errors, truncated streams, forced shutdown).
    func abort() {
        guard phase != .closed else { return }
        phase = .closed
        streamWriter = nil
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
    /// The `Content-Length` the response head announced, if it did.
    let declaredLength: Int?
    let discard: Bool
    var bytesWritten = 0

    init(connection: Connection, chunked: Bool, declaredLength: Int?, discard: Bool) {
        self.connection = connection
        self.chunked = chunked
        self.declaredLength = declaredLength
        self.discard = discard
    }

    func write(_ bytes: [UInt8]) async throws {
        if discard || bytes.isEmpty { return }
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
            connection.loop.execute { [self] in
                bytesWritten += bytes.count
                connection.appendStreamed(bytes, from: self, waiter: waiter)
            }
        }
    }
}
