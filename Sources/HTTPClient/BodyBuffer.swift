import Synchronization

/// The hand-over point between the loop thread of the exchange (which delivers body pieces)
/// and the consumer of an `HTTPBodyStream`. All state sits behind one mutex.
///
/// Once `highWater` bytes wait, reading pauses until the consumer brings them below
/// `lowWater`. While it is paused, the buffer notes when each piece is taken (`lastTake`),
/// so the client's sweep can tell a consumer that reads slowly from one that stopped.
final class BodyBuffer: Sendable {
    /// Bytes buffered ahead of the consumer before reading from the upstream pauses.
    static let highWater = 1 << 20
    /// Reading resumes once the consumer has brought the buffer below this.
    static let lowWater = highWater / 4
    /// What a piece costs besides its bytes (its array's header and allocation, its slot),
    /// counted toward the marks: many tiny pieces pause reading as their memory would.
    static let pieceOverhead = 64
    /// A piece is appended to the last one waiting when both together stay within this: a
    /// body in tiny chunks (`1\r\nx\r\n` over and over) reaches the consumer in pieces of
    /// about this size, not one allocation (and one hand-over) per byte. Larger pieces stay
    /// as they came.
    static let mergeLimit = 16 * 1024

    /// Pieces waiting for the consumer, oldest first. The first is kept on its own, the rest
    /// in an array taken from the front by an index (never `removeFirst`, which moves all
    /// the others): a body that arrives in one piece (the usual small one) needs no array.
    private struct Pieces {
        private var first: [UInt8]?
        private var rest: [[UInt8]] = []
        /// `rest[..<head]` have been taken (emptied).
        private var head = 0

        /// Adds `bytes` as a new piece, or to the last waiting one (see `mergeLimit`);
        /// returns whether a piece was made.
        mutating func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
            if head < rest.count {
                if rest[rest.count - 1].count + bytes.count <= BodyBuffer.mergeLimit {
                    rest[rest.count - 1].append(contentsOf: bytes)
                    return false
                }
                rest.append(Array(bytes))
            } else if first == nil {
                first = Array(bytes)
            } else if first!.count + bytes.count <= BodyBuffer.mergeLimit {
                first!.append(contentsOf: bytes)
                return false
            } else {
                rest.append(Array(bytes))
            }
            return true
        }

        /// The oldest piece, if any, taken out.
        mutating func removeFirst() -> [UInt8]? {
            if let piece = first {
                first = nil
                return piece
            }
            guard head < rest.count else { return nil }
            var piece: [UInt8] = []
            swap(&piece, &rest[head])
            head += 1
            if head == rest.count {
                rest.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64 && head * 2 >= rest.count {
                rest.removeFirst(head) // the taken half goes, in time proportional to what was taken
                head = 0
            }
            return piece
        }
    }

    private struct State {
        var chunks = Pieces()
        var buffered = 0
        var end: Result<Void, HTTPClientError>?
        var waiter: CheckedContinuation<Result<[UInt8]?, HTTPClientError>, Never>?
        /// Reading was paused and has not been asked to resume yet.
        var paused = false
        /// When (`monotonicSeconds`, the clock of `EventLoop.now`) the consumer last took a
        /// piece while reading was paused; -infinity before any. Only takes while paused
        /// are timed: the stall timeout counts from the later of this and the pause, and a
        /// body that never pauses costs no clock reading.
        var lastTake = -Double.infinity
        /// Asks the client to resume a paused exchange / to stop it. It holds the exchange
        /// (which holds this buffer) until it ends: `finish` lets it go, which breaks the
        /// cycle without a weak reference (a weak reference gives the exchange a side table,
        /// and every retain of it takes the slow path).
        var controls: Controls?
    }

    /// The exchange that fills the buffer and the client that runs it. Two references, not
    /// two closures: no closure contexts to allocate, and nothing to re-abstract when they
    /// pass through `Mutex.withLock`'s generic result.
    struct Controls: Sendable {
        let client: ClientLoop
        let exchange: Exchange

        /// Reads on for the paused exchange.
        func resume() { client.resume(exchange) }
        /// Stops the exchange.
        func cancel() { client.cancel(exchange) }
        /// Bounds the rest of the exchange by the total timeout.
        func awaitWhole() { client.awaitWhole(exchange) }
    }

    private let state: Mutex<State>

    init(controls: Controls) {
        state = Mutex(State(controls: controls))
    }

    /// Loop thread: a piece of body, handed to a waiting consumer or kept for it. Returns
    /// false when the consumer is so far behind that reading must pause until it asks for
    /// more (through the `resume` control).
    func deliver(_ bytes: UnsafeRawBufferPointer) -> Bool {
        enum Outcome { case handOver(CheckedContinuation<Result<[UInt8]?, HTTPClientError>, Never>), kept, pause }
        let outcome: Outcome = state.withLock { s in
            if let waiter = s.waiter {
                s.waiter = nil
                return .handOver(waiter)
            }
            s.buffered += bytes.count + (s.chunks.append(bytes) ? BodyBuffer.pieceOverhead : 0)
            guard s.buffered >= BodyBuffer.highWater else { return .kept }
            s.paused = true
            return .pause
        }
        switch outcome {
        case let .handOver(waiter):
            waiter.resume(returning: .success(Array(bytes)))
            return true
        case .kept: return true
        case .pause: return false
        }
    }

    /// Loop thread: the exchange ended, successfully or not.
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

    /// Loop thread: when the consumer last took a piece while reading was paused
    /// (`monotonicSeconds`), or -infinity. A paused transfer is stalled only once this, and
    /// the pause, are both `stallTimeout` ago: a consumer that keeps taking pieces, however
    /// slowly, is not cut off.
    var lastTake: Double { state.withLock { $0.lastTake } }

    /// Either side: the failure the exchange ended with, if it ended with one.
    var failure: HTTPClientError? {
        state.withLock { s in
            guard case let .failure(error)? = s.end else { return nil }
            return error
        }
    }

    /// Loop thread: drops the pieces the consumer has not taken (its transfer is about to
    /// fail: they could never make a whole body).
    func dropBuffered() {
        let dropped = state.withLock { s in
            defer { s.chunks = Pieces(); s.buffered = 0 }
            return s.chunks
        }
        _ = dropped // freed here, outside the lock
    }

    private typealias Piece = Result<[UInt8]?, HTTPClientError>

    /// Consumer: the next piece, nil at the end, or the failure, if one is ready now; nil
    /// when the consumer would have to wait.
    func nextIfReady() -> Result<[UInt8]?, HTTPClientError>? {
        var resume: Controls?
        let ready = state.withLock { BodyBuffer.take(from: &$0, resume: &resume) }
        resume?.resume()
        return ready
    }

    /// Consumer: the next piece, nil at the end, or the exchange's failure.
    func next() async -> Result<[UInt8]?, HTTPClientError> {
        await withCheckedContinuation { waiter in
            var resume: Controls?
            let ready: Piece? = state.withLock { s in
                if let ready = BodyBuffer.take(from: &s, resume: &resume) { return ready }
                precondition(s.waiter == nil, "HTTPBodyStream has one consumer at a time")
                s.waiter = waiter
                if s.paused { s.paused = false; resume = s.controls }
                return nil
            }
            if let ready { waiter.resume(returning: ready) }
            resume?.resume()
        }
    }

    /// Under the lock: the first buffered piece, or the end, if either is here. Sets `resume`
    /// when taking the piece brought a paused exchange below the low-water mark.
    private static func take(from s: inout State, resume: inout Controls?) -> Piece? {
        if let chunk = s.chunks.removeFirst() {
            s.buffered -= chunk.count + BodyBuffer.pieceOverhead
            if s.paused {
                s.lastTake = monotonicSeconds()
                if s.buffered < BodyBuffer.lowWater { s.paused = false; resume = s.controls }
            }
            return .success(chunk)
        }
        return s.end.map { $0.map { nil } }
    }

    /// Consumer: the body is read whole from now on, within the exchange's total timeout.
    func awaitWhole() {
        state.withLock { $0.end == nil ? $0.controls : nil }?.awaitWhole()
    }

    /// Either side: stop the exchange (a no-op once it ended).
    func cancel() {
        state.withLock { $0.end == nil ? $0.controls : nil }?.cancel()
    }
}
