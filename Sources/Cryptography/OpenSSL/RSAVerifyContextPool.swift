internal import COpenSSL
import Synchronization

/// A few `EVP_PKEY_CTX`s initialised for RSA PKCS#1 v1.5 verification of SHA-256 digests.
/// The pool owns the idle contexts (freed in `deinit`); a context taken out is owned by one
/// caller until it is given back, so no context is ever used by two threads at once.
final class RSAVerifyContextPool: Sendable {
    /// An `EVP_PKEY_CTX*` moved between the pool and one caller, never shared: that is why
    /// sending it across threads is safe (`@unchecked`).
    private struct Context: @unchecked Sendable { let pointer: OpaquePointer }

    private static let capacity = 8
    private let key: EVPKey
    private let idle = Mutex<[Context]>([])

    init(key: EVPKey) { self.key = key }

    deinit { idle.withLock { for ctx in $0 { EVP_PKEY_CTX_free(ctx.pointer) } } }

    /// Verifies `signature` over the SHA-256 `digest`.
    func verify(signature: [UInt8], digest: [UInt8]) -> Bool {
        guard let ctx = take() else { return false }
        let ok = EVP_PKEY_verify(ctx, signature, signature.count, digest, digest.count) == 1
        if !ok { _ = OpenSSLErrorQueue.drain() }
        give(ctx)
        return ok
    }

    private func take() -> OpaquePointer? {
        if let reused = idle.withLock({ $0.popLast() }) { return reused.pointer }
        guard let ctx = EVP_PKEY_CTX_new(key.pointer, nil) else { _ = OpenSSLErrorQueue.drain(); return nil }
        guard EVP_PKEY_verify_init(ctx) == 1, EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1,
              let md = FetchedDigests.sha256, EVP_PKEY_CTX_set_signature_md(ctx, md) == 1 else {
            EVP_PKEY_CTX_free(ctx)
            _ = OpenSSLErrorQueue.drain()
            return nil
        }
        return ctx
    }

    private func give(_ ctx: OpaquePointer) {
        let kept = idle.withLock { pool -> Bool in
            guard pool.count < RSAVerifyContextPool.capacity else { return false }
            pool.append(Context(pointer: ctx))
            return true
        }
        if !kept { EVP_PKEY_CTX_free(ctx) }
    }
}
