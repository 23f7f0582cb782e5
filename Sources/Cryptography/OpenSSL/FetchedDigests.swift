internal import COpenSSL

/// Digests fetched from the provider once. Passing `EVP_sha256()` makes OpenSSL 3 fetch
/// the implementation again (with its locks) on every init; a fetched `EVP_MD` skips that.
enum FetchedDigests {
    // nonisolated(unsafe): written once at first use, then only read; EVP_MD is immutable.
    nonisolated(unsafe) static let sha256: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)
    nonisolated(unsafe) static let sha384: OpaquePointer? = EVP_MD_fetch(nil, "SHA384", nil)

    static func prefetched(_ digest: OpaquePointer) -> OpaquePointer {
        if digest == EVP_sha256(), let sha256 { return sha256 }
        if digest == EVP_sha384(), let sha384 { return sha384 }
        return digest
    }
}
