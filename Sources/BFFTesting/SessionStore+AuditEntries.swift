import Foundation
import Sessions

extension SessionStore {
    /// The whole audit trail at or after `since`, oldest first (for tests: the product reads
    /// it a page at a time).
    public func auditEntries(since: Date?) async throws -> [AuditEntry] {
        var all: [AuditEntry] = []
        try await forEachAuditPage(since: since, pageSize: 1_000) { all += $0 }
        return all
    }
}
