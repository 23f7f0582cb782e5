internal import COpenSSL

/// Whether `a` and `b` are equal, in time that depends on their length only, not on where
/// they differ (`CRYPTO_memcmp`). Use it for MACs, digests of secrets and verifiers.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    return CRYPTO_memcmp(a, b, a.count) == 0
}
