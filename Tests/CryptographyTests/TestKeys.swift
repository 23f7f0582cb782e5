import Cryptography
import Foundation

/// RSA keys for tests. A fixed key (Fixtures/keys) where any key will do; generation, where
/// it is what a test checks, on a thread of its own: a 2048-bit key can take seconds of
/// CPU on a loaded machine, and on the concurrency pool it held up every other test.
enum TestKeys {
    static let rsa2048: RSAPrivateKey = {
        let url = Bundle.module.url(forResource: "Fixtures/keys/rsa-2048", withExtension: "pem")!
        return try! RSAPrivateKey(pem: String(decoding: try! Data(contentsOf: url), as: UTF8.self))
    }()

    static func generateRSA(bits: Int) async throws -> RSAPrivateKey {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try RSAPrivateKey.generate(bits: bits) }) }
        }
    }
}
