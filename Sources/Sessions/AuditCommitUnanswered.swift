/// A streamed audit write failed after its commit was sent and before it was answered (the
/// connection broke, or the server went away): the entries may be stored or not, and
/// `SessionStore.settleAuditBatch` says which. Any other error from the write means that
/// none is stored.
public struct AuditCommitUnanswered: Error, CustomStringConvertible {
    /// Why the answer was lost.
    public let cause: any Error

    public init(cause: any Error) { self.cause = cause }

    public var description: String { "the audit write's commit got no answer: \(cause)" }
}
