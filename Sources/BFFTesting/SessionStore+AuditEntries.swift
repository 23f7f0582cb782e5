import Foundation
import Sessions

extension SessionStore {
    /// The whole audit trail recorded at or after `since`, in the order recorded (for tests:
    /// the product reads it a page at a time, and only up to a bound every write has had
    /// time to commit by).
    public func auditEntries(since: AuditInstant?) async throws -> [AuditEntry] {
        var all: [AuditEntry] = []
        let until = try await auditClock() + .seconds(3_600) // past anything a test writes
        try await forEachAuditPage(recordedSince: since, before: until, pageSize: 1_000) { all += $0 }
        return all
    }
}
