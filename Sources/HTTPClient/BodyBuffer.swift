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
        /// Ask the multi handle to resume a paused transfer / to stop it. They hold the
        /// transfer (which holds this buffer) until it ends: `finish` lets them go, which
        /// breaks the cycle without a weak reference (a weak reference gives the transfer a
        /// side table, and every retain of it took the slow path in libcurl's callbacks).
        var controls: (resume: @Sendable () -> Void, cancel: @Sendable () -> Void)?
    }

    private let state: Mutex<State>

    init(resume: @escaping @Sendable () -> Void, cancel: @escaping @Sendable () -> Void) {
        state = Mutex(State(controls: (resume, cancel)))
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
        let (waiter, controls) = state.withLock { s in
            guard s.end == nil else { return (CheckedContinuation<Result<[UInt8]?, HTTPClientError>, Never>?.none, s.controls) }
            s.end = end
            defer { s.waiter = nil; s.controls = nil }
            return (s.waiter, s.controls)
        }
        _ = controls // released here, outside the lock
        waiter?.resume(returning: end.map { nil })
    }

    private typealias Piece = Result<[UInt8]?, HTTPClientError>

    /// Consumer: the next piece, nil at the end, or the failure, if one is ready now; nil
    /// when the consumer would have to wait.
    func nextIfReady() -> Result<[UInt8]?, HTTPClientError>? {
        var resume: (@Sendable () -> Void)?
        let ready = state.withLock { BodyBuffer.take(from: &$0, resume: &resume) }
        resume?()
        return ready
    }

    /// Consumer: the next piece, nil at the end, or the transfer's failure.
    func next() async -> Result<[UInt8]?, HTTPClientError> {
        await withCheckedContinuation { waiter in
            var resume: (@Sendable () -> Void)?
            let ready: Piece? = state.withLock { s in
                if let ready = BodyBuffer.take(from: &s, resume: &resume) { return ready }
                precondition(s.waiter == nil, "HTTPBodyStream has one consumer at a time")
                s.waiter = waiter
                if s.paused { s.paused = false; resume = s.controls?.resume }
                return nil
            }
            if let ready { waiter.resume(returning: ready) }
            resume?()
        }
    }

    /// Under the lock: the first buffered piece, or the end, if either is here. Sets `resume`
    /// when taking the piece brought a paused transfer below the low-water mark.
    private static func take(from s: inout State, resume: inout (@Sendable () -> Void)?) -> Piece? {
        if !s.chunks.isEmpty {
            let chunk = s.chunks.removeFirst()
            s.buffered -= chunk.count
            if s.paused && s.buffered < BodyBuffer.lowWater { s.paused = false; resume = s.controls?.resume }
            return .success(chunk)
        }
        return s.end.map { $0.map { nil } }
    }

    /// Either side: stop the transfer (a no-op once it ended).
    func cancel() {
        state.withLock { $0.end == nil ? $0.controls?.cancel : nil }?()
    }
}
