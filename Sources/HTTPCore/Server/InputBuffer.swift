/// The bytes a connection has received and not yet parsed. Taking parsed bytes off the front
/// only moves a start index; they leave the storage when more bytes arrive (one move per
/// read). With `[UInt8].removeFirst` per request, many small requests pipelined in one read
/// each moved the rest of the read: a cost that grew with the square of their number.
struct InputBuffer {
    private var storage: [UInt8] = []
    private var start = 0
    /// Storage up to this size stays with an idle connection; more (a large request once)
    /// goes, so that thousands of keep-alive connections do not each keep their largest read.
    static let keptCapacity = 16 * 1024

    var isEmpty: Bool { start == storage.count }
    var count: Int { storage.count - start }

    /// Appends received bytes (after dropping those already taken).
    mutating func append<S: Sequence<UInt8>>(contentsOf bytes: S) {
        if start > 0 {
            storage.removeFirst(start)
            start = 0
        }
        storage.append(contentsOf: bytes)
    }

    /// Takes the first `n` bytes (parsed).
    mutating func removeFirst(_ n: Int) {
        precondition(n <= count, "taking more input than there is")
        start += n
        if start == storage.count { // all taken: the storage is kept for the next read, unless large
            storage.removeAll(keepingCapacity: storage.capacity <= InputBuffer.keptCapacity)
            start = 0
        }
    }

    /// Drops every byte, and the storage with them.
    mutating func removeAll() {
        storage = []
        start = 0
    }

    /// Calls `body` with the bytes not yet taken.
    func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try storage.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[start...])) }
    }
}
