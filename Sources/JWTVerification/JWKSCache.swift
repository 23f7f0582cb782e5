import Cryptography
import Foundation

/// JWKS per issuer, cached. A token whose `kid` is not in the cached set triggers a
/// re-fetch, at most one per issuer every `refetchInterval` (10 s), so forged kids cannot
/// make smart-bff hammer an EHR.
public actor JWKSCache {
    public typealias Fetch = @Sendable (_ url: String) async throws -> [UInt8]

    private struct Entry {
        var keys: JWKSet
        var fetchedAt: ContinuousClock.Instant
    }

    private let fetch: Fetch
    private let refetchInterval: Duration
    private let clock: @Sendable () -> ContinuousClock.Instant
    private var entries: [String: Entry] = [:]
    private var lastAttempt: [String: ContinuousClock.Instant] = [:]
    /// How many times each JWKS URL was fetched (tests, metrics).
    public private(set) var fetchCount: [String: Int] = [:]

    public init(refetchInterval: Duration = .seconds(10),
                clock: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
                fetch: @escaping Fetch) {
        self.fetch = fetch
        self.refetchInterval = refetchInterval
        self.clock = clock
    }

    /// The key for `kid` from the JWKS at `url`.
    public func key(for kid: String?, jwksURL url: String) async throws(JWTError) -> RSAPublicKey {
        if let entry = entries[url], let key = try? entry.keys.key(for: kid) { return key }
        if entries[url] != nil, let last = lastAttempt[url], clock() - last < refetchInterval {
            throw JWTError(.unknownKey, "unknown kid (JWKS re-fetched less than 10 s ago)", kid: kid)
        }
        try await refresh(url)
        return try entries[url]!.keys.key(for: kid)
    }

    private func refresh(_ url: String) async throws(JWTError) {
        lastAttempt[url] = clock()
        fetchCount[url, default: 0] += 1
        let bytes: [UInt8]
        do { bytes = try await fetch(url) } catch { throw JWTError(.jwksUnavailable, "JWKS could not be fetched") }
        entries[url] = Entry(keys: try JWKSet(json: bytes), fetchedAt: clock())
    }
}
