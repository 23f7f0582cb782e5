/// How long a token refresh may take, and how many refreshes of one process may hold a
/// database connection at once.
public struct RefreshLimits: Sendable {
    /// A refresh that has not finished by then, counted from its start (waiting for its
    /// turn, discovery and the token request included), answers 503 and keeps the session,
    /// as an EHR outage does; a request already sent to the EHR goes on in the background,
    /// and what the EHR answers is stored. No refresh takes its turn after it.
    public var deadline: Duration
    /// Refreshes holding a database connection (and a token row lock) at once; more wait
    /// their turn within their deadline. Concurrent requests of one launch share one
    /// refresh, so this counts launches. One EHR's refreshes hold at most half of them
    /// (`RefreshGate.perIssuer`).
    public var concurrent: Int

    /// The limits for a process whose pool has `poolSize` connections: 15 s, and a quarter
    /// of the pool (at least one), so that an EHR whose token endpoint hangs leaves three
    /// quarters of the pool to everything else.
    public init(deadline: Duration = .seconds(15), poolSize: Int) {
        self.deadline = deadline
        concurrent = max(1, poolSize / 4)
    }
}
