import Synchronization

/// A response body delivered in pieces, with backpressure: while more than `highWater`
/// bytes wait for the consumer, libcurl is paused; it resumes when the consumer has taken
/// them. The stream ends with an error if the transfer failed or was truncated.
public final class HTTPBodyStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    struct State {
        var chunks: [[UInt8]] = []
        var buffered = 0
        var finished = false
        var failure: HTTPClientError?
        var waiter: CheckedContinuation<[UInt8]?, any Error>?
        var paused = false
    }

    private let state = Mutex(State())
    static let highWater = 1 << 20
    /// Asks the transfer to resume (set by the engine).
    let resume: @Sendable () -> Void
    private let cancelTransfer: @Sendable () -> Void

    init(resume: @escaping @Sendable () -> Void, cancel: @escaping @Sendable () -> Void) {
        self.resume = resume
        self.cancelTransfer = cancel
    }

    /// Called by the engine thread. Returns false when the transfer should pause.
    func deliver(_ chunk: [UInt8]) -> Bool {
        state.withLock { s in
            if let waiter = s.waiter {
                s.waiter = nil
                waiter.resume(returning: chunk)
                return true
            }
            // Refused pieces are not kept: libcurl delivers them again after the pause.
            if s.buffered >= HTTPBodyStream.highWater { s.paused = true; return false }
            s.chunks.append(chunk)
            s.buffered += chunk.count
            return true
        }
    }

    /// Called by the engine thread when the transfer ends.
    func finish(_ failure: HTTPClientError?) {
        state.withLock { s in
            s.finished = true
            s.failure = failure
            if let waiter = s.waiter, s.chunks.isEmpty {
                s.waiter = nil
                if let failure { waiter.resume(throwing: failure) } else { waiter.resume(returning: nil) }
            }
        }
    }

    func next() async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<[UInt8]?, any Error>) in
            var resumeTransfer = false
            state.withLock { s in
                if !s.chunks.isEmpty {
                    let chunk = s.chunks.removeFirst()
                    s.buffered -= chunk.count
                    if s.paused && s.buffered < HTTPBodyStream.highWater / 4 { s.paused = false; resumeTransfer = true }
                    waiter.resume(returning: chunk)
                } else if s.finished {
                    if let failure = s.failure { waiter.resume(throwing: failure) } else { waiter.resume(returning: nil) }
                } else {
                    s.waiter = waiter
                    if s.paused { s.paused = false; resumeTransfer = true }
                }
            }
            if resumeTransfer { resume() }
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: HTTPBodyStream
        public mutating func next() async throws -> [UInt8]? { try await stream.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }

    /// Reads the whole rest of the body.
    public func collect(limit: Int = .max) async throws -> [UInt8] {
        var all: [UInt8] = []
        for try await chunk in self {
            all += chunk
            if all.count > limit {
                cancel()
                throw HTTPClientError(.bodyTooLarge, "response body exceeds \(limit) bytes")
            }
        }
        return all
    }

    /// Stops the transfer; the consumer will not read the rest.
    public func cancel() { cancelTransfer() }

    deinit { cancelTransfer() }
}
