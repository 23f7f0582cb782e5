import Cryptography

/// The JWKS of each issuer, cached.
///
/// A token whose `kid` is not in the cached set triggers a re-fetch, at most one per issuer
/// every `refetchInterval` (10 s), so forged kids cannot make smart-bff hammer an EHR;
/// callers that arrive while a fetch is under way wait for it instead of starting another.
/// A change of the issuer's JWKS URL (new discovery document) fetches at once. A set older
/// than `maxAge` (an hour) is fetched again before use, so a key the EHR has withdrawn (a
/// compromised one, say) stops verifying within the hour (while the endpoint answers), not
/// at the next restart. That re-fetch obeys the same limit, and so does a first fetch that
/// failed: an EHR whose JWKS endpoint is down, or answers with no usable document, sees at
/// most one attempt per issuer every `refetchInterval`, however many ID tokens arrive.
///
/// When the re-fetch of a stale set fails (`jwksUnavailable`), the stale set still serves
/// until `staleGrace` (24 hours) after it was fetched, so a JWKS outage does not stop
/// sign-ins; it serves likewise while the limit holds back the next attempt (its kids
/// verify, an unknown `kid` is refused). The first fetch that succeeds replaces the set, so
/// a withdrawn key stops verifying then. Past the grace the failure stands. The network is
/// reached only through the injected `fetch`, and time only through `clock`.
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
    private let staleGrace: Duration
    private let clock: @Sendable () -> ContinuousClock.Instant
    private var entries: [String: Entry] = [:]
    /// Each issuer's last fetch: its URL and when it started.
    private var lastFetch: [String: (url: String, at: ContinuousClock.Instant)] = [:]
    private var inFlight: [String: (url: String, task: Task<JWKSet, any Error>)] = [:]
    /// How many fetches were started for each issuer (tests, metrics).
    public private(set) var fetchCount: [String: Int] = [:]
    /// Why each issuer's last fetch failed, until one succeeds.
    private var failures: [String: String] = [:]

    public init(refetchInterval: Duration = .seconds(10), maxAge: Duration = .seconds(3600),
                staleGrace: Duration = .seconds(24 * 3600),
                clock: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
                fetch: @escaping Fetch) {
        self.fetch = fetch
        self.refetchInterval = refetchInterval
        self.maxAge = maxAge
        self.staleGrace = staleGrace
        self.clock = clock
    }

    /// The key for `kid` (nil: the token has none) from `issuer`'s JWKS at `url`.
    public func key(for kid: String?, issuer: String, jwksURL url: String) async throws(JWTError) -> RSAPublicKey {
        let now = clock()
        let throttled = inFlight[issuer] == nil && lastFetch[issuer].map { $0.url == url && now - $0.at < refetchInterval } ?? false
        guard let entry = entries[issuer], entry.url == url else {
            // Nothing cached from this URL: a fetch of it less than refetchInterval ago failed.
            if throttled {
                throw .jwksUnavailable("JWKS fetch failed less than \(refetchInterval) ago: \(failures[issuer] ?? "no keys")")
            }
            return try await refresh(issuer: issuer, url: url).key(for: kid)
        }
        if now - entry.fetchedAt < maxAge {
            if let key = try? entry.keys.key(for: kid) { return key }
            if throttled { throw .unknownKey("unknown kid (JWKS re-fetched less than \(refetchInterval) ago)", kid: kid) }
            return try await refresh(issuer: issuer, url: url).key(for: kid)
        }
        // Stale. A fetch less than refetchInterval ago that left the set stale has failed.
        if throttled {
            guard now - entry.fetchedAt < staleGrace else {
                throw .jwksUnavailable("JWKS re-fetch failed less than \(refetchInterval) ago; cached set past its grace")
            }
            return try entry.keys.key(for: kid)
        }
        do {
            return try await refresh(issuer: issuer, url: url).key(for: kid)
        } catch where error.kind == .jwksUnavailable {
            // Read the entry again: another caller may have cached a newer set meanwhile. A kid
            // the stale set lacks may be one the EHR added, so the fetch failure stands for it.
            guard let entry = entries[issuer], entry.url == url, clock() - entry.fetchedAt < staleGrace,
                  let key = try? entry.keys.key(for: kid) else { throw error }
            return key
        }
    }

    /// Why the last fetch of `issuer`'s JWKS failed, if it did, none has succeeded since, and
    /// the cached set is past `maxAge`: a key that verified meanwhile came from the stale set
    /// (the grace above), which an operator should hear of before the grace ends. A failed
    /// re-fetch for an unknown `kid` leaves a fresh set, which is no one's concern yet.
    public func fetchFailure(issuer: String) -> String? {
        guard let failure = failures[issuer] else { return nil }
        guard let entry = entries[issuer], clock() - entry.fetchedAt < maxAge else { return failure }
        return nil
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
            lastFetch[issuer] = (url, clock())
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
            switch result {
            case let .success(keys):
                entries[issuer] = Entry(url: url, keys: keys, fetchedAt: clock())
                failures[issuer] = nil
            case let .failure(error):
                failures[issuer] = (error as? JWTError)?.reason ?? "JWKS could not be fetched"
            }
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
