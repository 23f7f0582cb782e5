import Cryptography
import Foundation
import Logging
import PostgresStore
import Sessions
import Synchronization

/// Writes PHI access audit entries to the store without the FHIR hot path waiting for a
/// commit: `record` only appends under a lock (no task per entry).
///
/// One writer task at a time streams the entries into the database. It opens a `COPY`,
/// sends what has been recorded every 10 ms, and commits after 200 ms or 2 000 entries;
/// then it opens the next `COPY` if entries are waiting, or ends until one is recorded.
/// - Pieces, not one burst per batch: the database works on rows as they come. Where
///   PostgreSQL shares its cores with smart-bff, a burst of 2 000 rows held the cores for
///   milliseconds and showed in the proxy's p99 (BENCHMARKS.md).
/// - Few commits: at 20 000 reads/s, committing every 200 entries instead of 2 000 cost
///   PostgreSQL a third more CPU per read.
///
/// A failed write keeps its entries, and the writer tries again 0.5 s later at first, then
/// at doubling intervals up to 30 s, until the database takes them: the trail does not
/// depend on later requests to be written. Meanwhile the entries wait in the writer, and
/// once writes have failed for `maxFailingTime`, or `maxPending` entries wait, `isBackedUp`
/// tells the proxy to refuse reads (fail closed) rather than serve PHI whose access cannot
/// be recorded, hold entries that a killed process would lose, or run out of memory.
/// At shutdown, `drain(until:)` retries sooner (0.2 s, doubling up to 2 s) until a deadline.
public final class AuditWriter: Sendable {
    /// When the writer sends and commits.
    public struct Timing: Sendable {
        /// A `COPY` is committed at this many entries...
        public var batchSize = 2000
        /// ...or this long after it opened.
        public var interval: Duration = .milliseconds(200)
        /// Pause between the pieces of a `COPY`.
        public var pieceInterval: Duration = .milliseconds(10)
        /// Pause before the first retry of a failed write; it doubles with each failure in a
        /// row, up to 30 s.
        public var firstRetry: Duration = .milliseconds(500)
        /// The same during a shutdown's `drain(until:)`: it doubles up to 2 s, so that a
        /// database back after seconds (a failover, a migration's lock) gets the entries
        /// before the deadline.
        public var shutdownFirstRetry: Duration = .milliseconds(200)
        /// How long a write waits for a lock on the trail held elsewhere (a DBA's `VACUUM
        /// FULL`, a migration) before it fails and is retried: the writer, and a shutdown's
        /// drain, are not held for the lock's length.
        public var lockWait: Duration = .seconds(5)
        /// Entries recorded and not yet in the database at which `isBackedUp` turns true:
        /// about a minute of reads at 8 000 a second, some 100 MB.
        public var maxPending = 500_000
        /// How long writes may keep failing (every one since the first of the streak) before
        /// `isBackedUp` turns true, however few entries wait: a trail that cannot be written
        /// (a lock on its table, a read-only or full database) stops PHI reads within about
        /// this long, rather than after hours of reads held in memory alone.
        public var maxFailingTime: Duration = .seconds(30)
        public init() {}
    }

    static let longestRetry: Duration = .seconds(30)
    /// The longest pause between retries while reads are refused: they start again soon
    /// after the database takes the entries.
    static let longestRetryWhileRefusing: Duration = .seconds(5)
    static let longestShutdownRetry: Duration = .seconds(2)

    /// The trail's state for `/metrics`.
    public struct Status: Sendable, Equatable {
        /// Entries recorded and not yet in the database (buffered or being written).
        public var pending: Int
        /// Entries written since start.
        public var written: Int
        /// Writes that failed (each kept its entries for a retry).
        public var failedWrites: Int
        /// Of `pending`, the entries of a write whose commit got no answer: they may be
        /// stored. `unsettledBatch` (hex) is in the `audit_batches` table if they are; the
        /// writer asks the database before it sends them again.
        public var unsettledEntries = 0
        public var unsettledBatch: String?
    }

    private struct FlushWaiter {
        /// `written` at which everything recorded before the flush is in the database.
        let target: Int
        let continuation: CheckedContinuation<Void, Never>
        /// A shutdown's drain: it waits through failed writes (until its deadline), where
        /// a flush gives up at the first.
        var draining = false
        var id: UInt64 = 0
    }

    private struct State {
        /// Recorded, not yet taken by the writer.
        var buffer: [AuditEntry] = []
        /// Taken by the writer and not yet committed: in the `COPY` under way, or held after
        /// a failed one.
        var writing = 0
        var written = 0
        var failedWrites = 0
        /// The write whose commit got no answer, until the database says whether it landed.
        var unsettled: (batch: [UInt8], entries: Int)?
        /// Writes failed in a row.
        var failures = 0
        /// When the first of them began.
        var failingSince: ContinuousClock.Instant?
        /// The writer task exists: writing, or pausing between pieces or before a retry.
        var writerRunning = false
        /// `flush()` calls waiting; while there are any, the writer does not pause.
        var flushWaiters: [FlushWaiter] = []
        /// `stop()` was called: no writer starts, and the running one ends.
        var stopped = false
        /// `drain(until:)` was called: failed writes are retried on the shutdown's schedule.
        var draining = false
        var nextWaiterID: UInt64 = 0
        /// The writer's pause under way, which a flush ends early.
        var pause: (id: UInt64, continuation: CheckedContinuation<Void, Never>)?
        var nextPauseID: UInt64 = 0

        /// The writer commits what it has at once, without pausing.
        var hurry: Bool { !flushWaiters.isEmpty || stopped }
        /// A failed write is retried at once: a flush waits for it (a drain waits through the
        /// pauses between retries instead).
        var retryNow: Bool { stopped || flushWaiters.contains { !$0.draining } }

        /// The flush waiters whose entries are all written (all of them, with `everyone`;
        /// all but the drains, with `failed`).
        mutating func satisfiedWaiters(everyone: Bool = false, failed: Bool = false) -> [CheckedContinuation<Void, Never>] {
            let isDone = { (waiter: FlushWaiter) in everyone || (failed && !waiter.draining) || waiter.target <= self.written }
            let done = flushWaiters.filter(isDone)
            flushWaiters.removeAll(where: isDone)
            return done.map(\.continuation)
        }
    }

    /// The writer's entries, oldest first, consumed by index: a backlog of a million entries
    /// is not shifted on every batch (nor under the lock `record` takes).
    private struct Held {
        var entries: [AuditEntry] = []
        /// `entries[..<committed]` are in the database.
        var committed = 0
        /// `entries[committed..<sent]` are in the `COPY` under way.
        var sent = 0

        var isEmpty: Bool { committed == entries.count }
        var inCopy: Int { sent - committed }

        /// Up to `count` entries not yet sent, now counted as sent.
        mutating func next(_ count: Int) -> [AuditEntry] {
            let end = min(entries.count, sent + max(0, count))
            defer { sent = end }
            return Array(entries[sent..<end])
        }

        /// The `COPY` committed: what it sent is done. Space is given back once all is done,
        /// or once the done part is half of what is held (amortised, outside the lock).
        mutating func commit() {
            committed = sent
            if committed == entries.count {
                entries.removeAll(keepingCapacity: true)
                (committed, sent) = (0, 0)
            } else if committed > entries.count / 2 {
                entries.removeFirst(committed)
                (committed, sent) = (0, sent - committed)
            }
        }

        /// The `COPY` failed: what it sent goes again, first.
        mutating func rewind() { sent = committed }
    }

    private let store: any SessionStore
    private let logger: Logger
    private let timing: Timing
    private let state = Mutex(State())
    /// `maxPending` entries wait (read on every proxied request, so an atomic, not the lock).
    private let backedUp = Atomic<Bool>(false)

    public init(store: any SessionStore, logger: Logger, timing: Timing = Timing()) {
        self.store = store
        self.logger = logger
        self.timing = timing
    }

    public var status: Status {
        state.withLock { state in
            Status(pending: state.buffer.count + state.writing, written: state.written, failedWrites: state.failedWrites,
                   unsettledEntries: state.unsettled?.entries ?? 0, unsettledBatch: state.unsettled.map { Identifier.hex($0.batch) })
        }
    }

    /// True while writes have failed for `maxFailingTime`, or `maxPending` entries wait for the
    /// database: reads should be refused until the trail can be written again.
    public var isBackedUp: Bool { backedUp.load(ordering: .relaxed) }

    /// Buffers `entry`; the writer sends it within 10 ms and commits it within about 200 ms.
    /// An entry is never dropped, whatever waits already.
    public func record(_ entry: AuditEntry) {
        let start = state.withLock { state in
            state.buffer.append(entry)
            if state.buffer.count + state.writing >= timing.maxPending && !backedUp.load(ordering: .relaxed) {
                backedUp.store(true, ordering: .relaxed)
            }
            if state.writerRunning || state.stopped { return false }
            state.writerRunning = true
            return true
        }
        // Explicitly on the global pool: the writer must not depend on the event loop of the
        // handler that recorded first (a stopped loop runs nothing, and the shutdown flush
        // would wait for the writer forever).
        if start { Task(executorPreference: globalConcurrentExecutor) { await self.writeLoop() } }
    }

    /// Returns once everything recorded before the call is in the database, or after a write
    /// of it has failed (the entries are kept and retried), or at once after `stop()`. Ends
    /// the writer's pauses, so it commits what it has at once.
    public func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (waiting, pause) = state.withLock { state -> (Bool, CheckedContinuation<Void, Never>?) in
                let target = state.written + state.writing + state.buffer.count
                guard state.written < target, !state.stopped else { return (false, nil) }
                state.flushWaiters.append(FlushWaiter(target: target, continuation: continuation))
                defer { state.pause = nil }
                return (true, state.pause?.continuation)
            }
            if !waiting { continuation.resume() }
            pause?.resume()
        }
    }

    /// For a shutdown: returns once everything recorded before the call is in the database,
    /// or at `deadline`, whichever comes first (`status.pending` then says what is left).
    /// Ends the writer's pauses, so it commits what it has (or retries) at once; from then
    /// on a failed write is retried 0.2 s later, then at doubling intervals up to 2 s, not
    /// up to 30 s: a database that refuses writes for seconds (a failover, a migration's
    /// lock) loses nothing. A write still under way at the deadline is not waited for.
    public func drain(until deadline: ContinuousClock.Instant) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (id, pause) = state.withLock { state -> (UInt64?, CheckedContinuation<Void, Never>?) in
                let target = state.written + state.writing + state.buffer.count
                guard state.written < target, !state.stopped else { return (nil, nil) }
                if !state.draining { (state.draining, state.failures) = (true, 0) } // the shutdown's retries start at 0.2 s
                state.nextWaiterID += 1
                state.flushWaiters.append(FlushWaiter(target: target, continuation: continuation, draining: true, id: state.nextWaiterID))
                defer { state.pause = nil }
                return (state.nextWaiterID, state.pause?.continuation)
            }
            guard let id else { return continuation.resume() }
            pause?.resume()
            // A Dispatch timer: the deadline holds however busy the Swift concurrency pool is,
            // and whatever the write under way waits for.
            DispatchQueue.global().asyncAfter(deadline: .now() + max(0, (deadline - .now).seconds)) { [self] in
                let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    guard let index = state.flushWaiters.firstIndex(where: { $0.draining && $0.id == id }) else { return nil }
                    return state.flushWaiters.remove(at: index).continuation
                }
                waiter?.resume()
            }
        }
    }

    /// Ends the writer for good, after the last flush of a shutdown: a failed write is not
    /// retried any more, and entries recorded later stay buffered (`status.pending`).
    public func stop() {
        let pause = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.stopped = true
            defer { state.pause = nil }
            return state.pause?.continuation
        }
        pause?.resume()
    }

    // MARK: The writer

    /// One `COPY` after another while entries are waiting; a failed one is retried after a
    /// pause. Ends when the buffer is empty.
    ///
    /// A `COPY` whose commit got no answer (`AuditCommitUnanswered`: the connection broke)
    /// may have been stored all the same. So before its entries are sent again, the store
    /// says whether its batch is in (`settleAuditBatch`); until it can say, nothing else is
    /// written. Any other failure rolled the `COPY` back.
    private func writeLoop() async {
        var held = Held()
        while true {
            let done = state.withLock { state -> [CheckedContinuation<Void, Never>]? in
                guard (held.isEmpty && state.buffer.isEmpty) || state.stopped else { return nil }
                state.writerRunning = false
                return state.satisfiedWaiters(everyone: true)
            }
            if let done {
                for waiter in done { waiter.resume() }
                return
            }
            if let batch = state.withLock({ $0.unsettled?.batch }) {
                let asked = ContinuousClock.now
                do {
                    if try await store.settleAuditBatch(batch) {
                        let count = held.inCopy
                        held.commit()
                        written(count)
                    } else {
                        held.rewind()
                    }
                    state.withLock { $0.unsettled = nil }
                } catch {
                    await pause(failed(error, attempt: asked), retry: true)
                }
                continue
            }
            let opened = ContinuousClock.now
            let batch = SecureRandom.bytes(16)
            do {
                try await store.appendAudit(lockWait: timing.lockWait, batch: batch, streaming: { await self.nextPiece(held: &held, opened: opened) })
                let count = held.inCopy
                held.commit()
                written(count)
            } catch {
                if error is AuditCommitUnanswered && held.inCopy > 0 {
                    state.withLock { [count = held.inCopy] in $0.unsettled = (batch, count) }
                } else {
                    held.rewind() // rolled back: what it sent goes again, first
                }
                await pause(failed(error, attempt: opened), retry: true)
            }
        }
    }

    /// The next piece of the `COPY` opened at `opened`, or nil to commit it: what is buffered
    /// (up to the batch size), after a pause of up to `pieceInterval` (none for the first
    /// piece, or while a flush waits).
    private func nextPiece(held: inout Held, opened: ContinuousClock.Instant) async -> [AuditEntry]? {
        if held.inCopy > 0 {
            let age = ContinuousClock.now - opened
            if held.inCopy >= timing.batchSize || age >= timing.interval || state.withLock({ $0.hurry }) { return nil }
            await pause(min(timing.pieceInterval, timing.interval - age))
        }
        // What was recorded since: a copy of the new entries only, under the lock.
        state.withLock { state in
            state.writing += state.buffer.count
            held.entries.append(contentsOf: state.buffer)
            state.buffer.removeAll(keepingCapacity: true)
        }
        // A batch at most, so that no COPY grows without bound (after a failed write, the
        // backlog goes a batch at a time).
        return held.next(timing.batchSize - held.inCopy)
    }

    private func written(_ count: Int) {
        let (done, recovered) = state.withLock { state in
            state.failures = 0
            state.failingSince = nil
            state.writing -= count
            state.written += count
            var recovered = false
            if state.buffer.count + state.writing < timing.maxPending && backedUp.load(ordering: .relaxed) {
                backedUp.store(false, ordering: .relaxed)
                recovered = true
            }
            return (state.satisfiedWaiters(), recovered)
        }
        // Where the refusal (critical) shows, so does this: a log kept at error shows both.
        if recovered { logger.error("audit trail written again: FHIR reads are served again") }
        for waiter in done { waiter.resume() }
    }

    /// Counts a failed write, begun at `attempt` (its entries stay with the writer, first in
    /// line); returns the pause before the retry. Every flush waiting gives up (its entries
    /// stay pending); a drain waits on. The first failure of a streak sets a timer: writes
    /// still failing `maxFailingTime` after that first attempt began make the proxy refuse
    /// reads, then, not at the next failure (an attempt may wait seconds for a lock, and
    /// retries come seconds apart). The log gives how many entries wait and the error's kind
    /// (SQLSTATE), not what they hold nor the server's message: it may quote a value, and
    /// values are PHI.
    private func failed(_ error: any Error, attempt: ContinuousClock.Instant) -> Duration {
        let (retry, waiting, done, streak) = state.withLock { state in
            state.failures += 1
            state.failedWrites += 1
            let streak: ContinuousClock.Instant? = state.failingSince == nil ? attempt : nil
            if state.failingSince == nil { state.failingSince = attempt }
            var retry = state.draining
                ? AuditWriter.retryDelay(afterFailures: state.failures, first: timing.shutdownFirstRetry, longest: AuditWriter.longestShutdownRetry)
                : AuditWriter.retryDelay(afterFailures: state.failures, first: timing.firstRetry)
            if backedUp.load(ordering: .relaxed) { retry = min(retry, AuditWriter.longestRetryWhileRefusing) }
            return (retry, state.buffer.count + state.writing, state.satisfiedWaiters(failed: true), streak)
        }
        if let streak {
            let due = max(0, (streak + timing.maxFailingTime - .now).seconds)
            DispatchQueue.global().asyncAfter(deadline: .now() + due) { [weak self] in self?.refuseIfStillFailing(since: streak) }
        }
        // Both describe themselves by kind and SQLSTATE alone.
        let cause = error is PostgresError || error is AuditCommitUnanswered ? "\(error)" : "\(type(of: error))"
        logger.error("audit write failed; will retry", metadata: [
            "audit.entries": .stringConvertible(waiting),
            "audit.retry_in": .string("\(retry)"),
            "error.detail": .string(cause),
        ])
        for waiter in done { waiter.resume() }
        return retry
    }

    /// The failure timer: if writes have failed ever since `since` (the streak it was set for
    /// goes on), reads are refused from now on, with one critical log line.
    private func refuseIfStillFailing(since: ContinuousClock.Instant) {
        let waiting = state.withLock { state -> Int? in
            guard state.failingSince == since, !backedUp.load(ordering: .relaxed) else { return nil }
            backedUp.store(true, ordering: .relaxed)
            return state.buffer.count + state.writing
        }
        guard let waiting else { return }
        logger.critical("audit trail not written for \(Int(timing.maxFailingTime.seconds)) s: FHIR reads are refused (503 audit-unavailable) until it is",
                        metadata: ["audit.entries": .stringConvertible(waiting)])
    }

    /// Waits `duration` on a Dispatch timer (a sleeping task can wake late when the Swift
    /// concurrency pool is busy), or less if a flush comes: none at all while one waits. The
    /// pause before a `retry` is kept while only a drain waits.
    private func pause(_ duration: Duration, retry: Bool = false) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let id = state.withLock { state -> UInt64? in
                if retry ? state.retryNow : state.hurry { return nil }
                state.nextPauseID += 1
                state.pause = (state.nextPauseID, continuation)
                return state.nextPauseID
            }
            guard let id else { return continuation.resume() }
            DispatchQueue.global().asyncAfter(deadline: .now() + duration.seconds) { [self] in
                let ended = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    guard let pause = state.pause, pause.id == id else { return nil }
                    state.pause = nil
                    return pause.continuation
                }
                ended?.resume()
            }
        }
    }

    /// `first`, twice that, four times... up to `longest`.
    static func retryDelay(afterFailures failures: Int, first: Duration, longest: Duration = longestRetry) -> Duration {
        min(longest, first * (1 << min(max(failures - 1, 0), 10)))
    }
}
