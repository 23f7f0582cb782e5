import Synchronization

/// The hand-over point between the loop thread of the transfer (which delivers body pieces)
/// and the consumer of an `HTTPBodyStream`. All state sits behind one mutex.
final class BodyBuffer: Sendable {
    /// Bytes buffered ahead of the consumer before reading from the upstream pauses.
    static let highWater = 1 << 20
    /// Reading resumes once the consumer has brought the buffer below this.
    static let lowWater = highWater / 4

    private struct State {
        var chunks: [[UInt8]] = []
        var buffered = 0
        var end: Result<Void, HTTPClientError>?
        var waiter: CheckedContinuation<Result<[UInt8]?, HTTPClientError>, Never>?
        /// libcurl was told to pause and has not been asked to resume yet.
        var paused = false
    }

    private let state = Mutex(State())
    /// Ask the multi handle to resume a paused transfer / to stop it.
    private let resumeTransfer: @Sendable () -> Void
    private let cancelTransfer: @Sendable () -> Void

    init(resume: @escaping @Sendable () -> Void, cancel: @escaping @Sendable () -> Void) {
        resumeTransfer = resume
        cancelTransfer = cancel
    }

    /// Loop thread: a piece of body. Returns false when the transfer must pause; the piece
    /// is then not kept (libcurl hands it over again after the pause).
    func deliver(_ bytes: UnsafeRawBufferPointer) -> Bool {
        enum Outcome { case handOver(CheckedContinuation<Result<[UInt8]?, HTTPClientError>, Never>), kept, pause }
        let outcome: Outcome = state.withLock { s in
            if let waiter = s.waiter {
                s.waiter = nil
                return .handOver(waiter)
            }
            if s.buffered >= BodyBuffer.highWater {
                s.paused = true
                return .pause
            }
            s.chunks.append(Array(bytes))
            s.buffered += bytes.count
            return .kept
        }
        switch outcome {
        case let .handOver(waiter):
            waiter.resume(returning: .success(Array(bytes)))
            return true
        case .kept: return true
        case .pause: return false
        }
    }

    /// Loop thread: the transfer ended, successfully or not.
    func finish(_ end: Result<Void, HTTPClientError>) {
        let waiter = state.withLock { s in
            guard s.end == nil else { return CheckedContinuation<Result<[UInt8]?, HTTPClientError>, Never>?.none }
            s.end = end
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: end.map { nil })
    }

    /// Consumer: the next piece, nil at the end, or the transfer's failure.
    func next() async -> Result<[UInt8]?, HTTPClientError> {
        await withCheckedContinuation { waiter in
            var resume = false
            let ready: Result<[UInt8]?, HTTPClientError>? = state.withLock { s in
                if !s.chunks.isEmpty {
                    let chunk = s.chunks.removeFirst()
                    s.buffered -= chunk.count
                    if s.paused && s.buffered < BodyBuffer.lowWater { s.paused = false; resume = true }
                    return .success(chunk)
                }
                if let end = s.end { return end.map { nil } }
                precondition(s.waiter == nil, "HTTPBodyStream has one consumer at a time")
                s.waiter = waiter
                if s.paused { s.paused = false; resume = true }
                return nil
            }
            if let ready { waiter.resume(returning: ready) }
            if resume { resumeTransfer() }
        }
    }

    /// Either side: stop the transfer (a no-op once it ended).
    func cancel() {
        if state.withLock({ $0.end == nil }) { cancelTransfer() }
    }
}
