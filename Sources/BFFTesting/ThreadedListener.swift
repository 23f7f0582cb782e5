import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A listener on 127.0.0.1 (an ephemeral port) for the tests' own servers: each accepted
/// connection is served on a thread of its own, with blocking calls. Every descriptor it
/// tracks is ended by `shutdown()` or `endConnections()`, and closed once untracked.
public final class ThreadedListener: Sendable {
    public let port: Int
    private let listener: Int32
    private let open = Mutex<Set<Int32>>([])

    public init(backlog: Int32 = 128) throws {
        (listener, port) = try LoopbackSocket.listen(backlog: backlog)
    }

    /// Accepts connections from now on; `serve` runs for each on its own thread, and the
    /// connection closes when it returns.
    public func start(_ serve: @escaping @Sendable (Int32) -> Void) {
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 {
                    if errno == EINTR { continue }
                    return // shut down
                }
                track(client)
                Thread.detachNewThread { [self] in
                    serve(client)
                    untrack(client)
                }
            }
        }
    }

    /// Another descriptor to end at `shutdown()` (a connection onwards, say).
    public func track(_ fd: Int32) { _ = open.withLock { $0.insert(fd) } }

    /// Closes `fd`, under the lock `shutdown` takes, so that it never touches a reused number.
    public func untrack(_ fd: Int32) {
        open.withLock { open in
            open.remove(fd)
            Glibc.close(fd)
        }
    }

    /// Ends every tracked connection; new ones are still accepted.
    public func endConnections() {
        open.withLock { open in for fd in open { Glibc.shutdown(fd, Int32(SHUT_RDWR)) } }
    }

    /// Stops accepting and ends every tracked connection.
    public func shutdown() {
        Glibc.shutdown(listener, Int32(SHUT_RDWR))
        endConnections()
    }

    deinit {
        shutdown()
        Glibc.close(listener)
    }
}
