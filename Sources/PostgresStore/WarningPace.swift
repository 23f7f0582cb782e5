import Foundation
import Synchronization

/// Lets a repeated warning through at most once per `interval`, counting the occurrences
/// it held back, so that a condition hit by every request does not flood the log.
final class WarningPace: Sendable {
    private let interval: TimeInterval
    private let state = Mutex<(last: Date?, heldBack: Int)>((nil, 0))

    init(interval: TimeInterval) { self.interval = interval }

    /// For one occurrence at `now`: the number held back since the last warning when this
    /// one should be logged, nil when it should not.
    func due(now: Date) -> Int? {
        state.withLock { state in
            if let last = state.last, now.timeIntervalSince(last) < interval {
                state.heldBack += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.heldBack
        }
    }
}
