#if canImport(Glibc)
import Glibc
#endif

/// The process's limit on open file descriptors (`RLIMIT_NOFILE`), which bounds its
/// connections: every client, upstream and database connection takes one.
public enum OpenFileLimit {
    /// The soft and hard limits now; nil if they cannot be read.
    public static var current: (soft: UInt64, hard: UInt64)? {
        var limit = rlimit()
        guard getrlimit(nofile, &limit) == 0 else { return nil }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// Raises the soft limit to the hard one (often 1 024 against 524 288 or more), as a
    /// server that holds thousands of connections needs; returns the limits after.
    @discardableResult
    public static func raiseToHardLimit() -> (soft: UInt64, hard: UInt64)? {
        var limit = rlimit()
        guard getrlimit(nofile, &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(nofile, &limit)
        }
        return current
    }

    private static var nofile: __rlimit_resource_t { __rlimit_resource_t(RLIMIT_NOFILE.rawValue) }
}
