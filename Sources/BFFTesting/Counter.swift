import Synchronization

/// A count shared between threads or tasks and the test that reads it.
public final class Counter: Sendable {
    private let value = Atomic(0)
    public init() {}
    public func set(_ new: Int) { value.store(new, ordering: .releasing) }
    public func increment() { value.add(1, ordering: .acquiringAndReleasing) }
    public var current: Int { value.load(ordering: .acquiring) }
}
