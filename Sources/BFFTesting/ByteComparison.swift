import Foundation

extension Array where Element == UInt8 {
    /// Whether these bytes are `whole`'s from `offset` on. One `memcmp`: a byte-by-byte
    /// comparison over megabytes in a debug build holds a thread of the test run's task pool
    /// (two threads on a two-core machine) for a second or more, stalling every other test.
    public func isSlice(of whole: [UInt8], at offset: Int = 0) -> Bool {
        guard offset >= 0, offset + count <= whole.count else { return false }
        guard !isEmpty else { return true }
        return withUnsafeBytes { part in whole.withUnsafeBytes { memcmp(part.baseAddress!, $0.baseAddress! + offset, part.count) == 0 } }
    }
}
