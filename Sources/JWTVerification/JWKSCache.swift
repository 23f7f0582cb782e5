import Cryptography

/// The JWKS of each issuer, cached.
///
/// A token whose `kid` is not in the cached set triggers a re-fetch, at most one per issuer
/// every `refetchInterval` (10 s), so forged kids cannot make smart-bff hammer an EHR;
/// callers that arrive while a fetch is under way wait for it instead of starting another.
/// A change of the issuer's JWKS URL (new discovery document) fetches at once. A set older
/// than `maxAge` (an hour) is fetched again before use, so a key the EHR has withdrawn (a
/// compromised one, say) stops verifying within the hour, not at the next restart. The
/// network is reached only through the injected `fetch`, and time only through `clock`.
public actor JWKSCache {
    /// Fetches the JWKS document at a URL (the BFF's HTTP client; a stub in tests).
    public typealias Fetch = @Sendable (_ url: String) async throws -> [UInt8]

    private struct Entry {
        let url: String
        let keys: JWKSet
        let fetchedAt: ContinuousClock.Instant
    }

    private let fetch: Fetch
    private let refetchInterval: Duration
    private let maxAge: Duration
    private let clock: @Sendable () -> ContinuousClock.Instant
    private var entries: [String: Entry] = [:]
    private var lastFetch: [String: ContinuousClock.Instant] = [:]
    private var inFlight: [String: (url: String, task: Task<JWKSet, any Error>)] = [:]
    /// How many fetches were started for each issuer (tests, metrics).
    public private(set) var fetchCount: [String: Int] = [:]

    public init(refetchInterval: Duration = .seconds(10), maxAge: Duration = .seconds(3600),
                clock: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
                fetch: @escaping Fetch) {
        self.fetch = fetch
        self.refetchInterval = refetchInterval
        self.maxAge = maxAge
        self.clock = clock
    }

    /// The key for `kid` (nil: the token has none) from `issuer`'s JWKS at `url`.
    public func key(for kid: String?, issuer: String, jwksURL url: String) async throws(JWTError) -> RSAPublicKey {
        if let entry = entries[issuer], entry.url == url, clock() - entry.fetchedAt < maxAge {
            if let key = try? entry.keys.key(for: kid) { return key }
            if inFlight[issuer] == nil, let last = lastFetch[issuer], clock() - last < refetchInterval {
                throw .unknownKey("unknown kid (JWKS re-fetched less than \(refetchInterval) ago)", kid: kid)
            }
        }
        return try await refresh(issuer: issuer, url: url).key(for: kid)
    }

    /// The same, with the JWKS URL standing for the issuer.
    public func key(for kid: String?, jwksURL url: String) async throws(JWTError) -> RSAPublicKey {
        try await key(for: kid, issuer: url, jwksURL: url)
    }

    /// Fetches (or joins the fetch under way) and caches the issuer's JWKS.
    private func refresh(issuer: String, url: String) async throws(JWTError) -> JWKSet {
        let task: Task<JWKSet, any Error>
        if let running = inFlight[issuer], running.url == url {
            task = running.task
        } else {
            lastFetch[issuer] = clock()
            fetchCount[issuer, default: 0] += 1
            let fetch = self.fetch
            task = Task {
                let bytes: [UInt8]
                do { bytes = try await fetch(url) } catch { throw JWTError.jwksUnavailable("JWKS could not be fetched: \(error)") }
                return try JWKSet(json: bytes)
            }
            inFlight[issuer] = (url, task)
        }
        let result = await task.result
        // The first caller to resume after the fetch caches its result, in the same actor
        // step that clears `inFlight`, so a later fetch's keys are never overwritten.
        if inFlight[issuer]?.task == task {
            inFlight[issuer] = nil
            if case let .success(keys) = result { entries[issuer] = Entry(url: url, keys: keys, fetchedAt: clock()) }
        }
        switch result {
        case let .success(keys):
            return keys
        case let .failure(error as JWTError):
            throw error
        case .failure:
            throw .jwksUnavailable("JWKS could not be fetched")
        }
    }
}
