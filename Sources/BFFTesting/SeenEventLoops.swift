import HTTPCore
import Synchronization

/// Weak references to the event loops that request handlers ran on, each with a tag, so
/// that a test can tell whether a stopped server's loops are still alive (kept by someone).
package final class SeenEventLoops: Sendable {
    private struct Seen {
        weak var loop: EventLoop?
        let tag: String
    }

    private let seen = Mutex<[Seen]>([])

    package init() {}

    /// Notes the loop the caller runs on, if any (call from a handler).
    package func addCurrent(tag: String = "") {
        guard let loop = EventLoop.current else { return }
        seen.withLock { $0.append(Seen(loop: loop, tag: tag)) }
    }

    /// How many distinct loops noted with `tag` still exist.
    package func alive(tag: String = "") -> Int {
        seen.withLock { all in
            Set(all.filter { $0.tag == tag }.compactMap { $0.loop.map(ObjectIdentifier.init) }).count
        }
    }
}
