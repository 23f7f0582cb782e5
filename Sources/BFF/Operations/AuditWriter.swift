import Foundation
import Logging
import Sessions
import Synchronization

/// Buffers PHI access audit entries and writes them in batches, so that the FHIR hot path
/// does not wait for a commit per request. Entries are flushed every 200 ms, at 200
/// entries, and at shutdown. `record` only appends under a lock: no task per entry.
public final class AuditWriter: Sendable {
    static let batchSize = 200
    static let interval: Duration = .milliseconds(200)

    private struct State {
        var buffer: [AuditEntry] = []
        /// A flush is scheduled or running; it takes whatever is buffered when it starts.
        var flushScheduled = false
    }

    private let store: any SessionStore
    private let logger: Logger
    private let state = Mutex(State())

    public init(store: any SessionStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Buffers `entry`; a flush follows within 200 ms (at once when the batch is full).
    public func record(_ entry: AuditEntry) {
        let schedule: Duration? = state.withLock { state in
            state.buffer.append(entry)
            if state.buffer.count >= AuditWriter.batchSize { state.flushScheduled = true; return .zero }
            if state.flushScheduled { return nil }
            state.flushScheduled = true
            return AuditWriter.interval
        }
        guard let schedule else { return }
        Task { [self] in
            if schedule > .zero { try? await Task.sleep(for: schedule) }
            await flush()
        }
    }

    /// Writes everything buffered; on failure the entries are kept for the next flush.
    /// (Rows carry their own time, so two batches may be written concurrently.)
    public func flush() async {
        let batch = state.withLock { state in
            state.flushScheduled = false
            defer { state.buffer.removeAll(keepingCapacity: true) }
            return state.buffer
        }
        guard !batch.isEmpty else { return }
        do {
            try await store.appendAudit(batch)
        } catch {
            logger.error("audit write failed; will retry", metadata: ["audit.entries": .stringConvertible(batch.count)])
            state.withLock { $0.buffer.insert(contentsOf: batch, at: 0) }
        }
    }
}
