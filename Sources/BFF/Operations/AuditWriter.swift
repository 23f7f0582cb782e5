import Foundation
import Logging
import Sessions

/// Buffers PHI access audit entries and writes them in batches, so that the FHIR hot path
/// does not wait for a commit per request. Entries are flushed every 200 ms, at 200
/// entries, and at shutdown.
public actor AuditWriter {
    private let store: any SessionStore
    private let logger: Logger
    private var buffer: [AuditEntry] = []
    private var flushTask: Task<Void, Never>?

    public init(store: any SessionStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    public func record(_ entry: AuditEntry) {
        buffer.append(entry)
        if buffer.count >= 200 {
            Task { await flush() }
        } else if flushTask == nil {
            flushTask = Task {
                try? await Task.sleep(for: .milliseconds(200))
                await self.flush()
            }
        }
    }

    /// Writes everything buffered; on failure the entries are kept for the next flush.
    public func flush() async {
        flushTask = nil
        guard !buffer.isEmpty else { return }
        let batch = buffer
        buffer.removeAll()
        do {
            try await store.appendAudit(batch)
        } catch {
            logger.error("audit write failed; will retry", metadata: ["audit.entries": .stringConvertible(batch.count)])
            buffer = batch + buffer
        }
    }
}
