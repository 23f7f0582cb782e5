internal import CCurl
import Synchronization

/// Owns one libcurl easy handle (`CURL *`) and its error buffer, and frees both in deinit.
///
/// Used by one thread at a time: the task that configures it for a request, then the loop
/// thread of its multi handle while the request runs (posting to the loop orders the
/// hand-over), hence
/// `@unchecked Sendable`.
final class CurlEasy: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
    /// CURLOPT_ERRORBUFFER: libcurl writes its detailed message here on failure.
    private let errorBuffer: UnsafeMutablePointer<CChar>

    /// Takes ownership of `handle`: it is cleaned up when this object goes.
    init(takingOwnershipOf handle: UnsafeMutableRawPointer) {
        self.handle = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        curl_easy_cleanup(handle)
        errorBuffer.deallocate()
    }

    /// Points CURLOPT_ERRORBUFFER at this handle's buffer (again after each reset).
    func attachErrorBuffer() {
        errorBuffer[0] = 0
        bff_curl_setopt_ptr(handle, CURLOPT_ERRORBUFFER, errorBuffer)
    }

    /// libcurl's detailed message for the last failure, or "".
    var errorText: String { String(cString: errorBuffer) }
}

/// Easy handles between requests. Reusing them keeps libcurl's per-handle state warm (TLS
/// session IDs, buffers); the connections themselves live in the multi handle's cache.
final class CurlEasyPool: Sendable {
    private let idle = Mutex<[CurlEasy]>([])
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// A handle with every option at its default, or nil if libcurl cannot make one.
    func acquire() -> CurlEasy? {
        if let easy = idle.withLock({ $0.popLast() }) {
            curl_easy_reset(easy.handle) // keeps the handle's caches, forgets the last request's options
            return easy
        }
        return curl_easy_init().map(CurlEasy.init(takingOwnershipOf:))
    }

    /// Returns a handle that is no longer in the multi handle. Beyond `capacity` it is freed.
    func release(_ easy: CurlEasy) {
        let surplus: CurlEasy? = idle.withLock { idle in
            guard idle.count < capacity else { return easy }
            idle.append(easy)
            return nil
        }
        _ = surplus // freed here, outside the lock
    }
}
