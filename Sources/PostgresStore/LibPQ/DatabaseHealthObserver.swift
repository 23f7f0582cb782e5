/// Told by a `ConnectionPool` how the database serves its work (see
/// `ConnectionPool.Configuration.healthObserver`). Called on the pool's callers' threads,
/// concurrently, for every statement: implementations must be quick and thread-safe.
public protocol DatabaseHealthObserver: Sendable {
    /// Work failed because the database cannot serve it now (`PostgresError.isTransient`).
    func failed(_ error: PostgresError)
    /// Work was served: it succeeded, or the database answered, refusing a statement.
    func served()
}
