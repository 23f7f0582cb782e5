#if canImport(Glibc)
import Glibc
#endif
internal import CLibSSL

/// Owns one OpenSSL client session (`SSL *`, with its socket BIO) over a non-blocking
/// socket, and frees it in deinit. Used on one event loop thread only.
///
/// Every call reports what the socket must become ready for (`wantRead`, `wantWrite`)
/// instead of blocking. OpenSSL's error queue is per thread: it is cleared before each call
/// and read right after a failure.
final class TLSSession {
    private let ssl: OpaquePointer

    /// What a handshake step, read or write did.
    enum Outcome: Equatable {
        /// Bytes read or written (0 for a completed handshake).
        case done(Int)
        case wantRead
        case wantWrite
        /// The peer ended the connection: `cleanly` with a TLS close_notify, or not.
        case closed(cleanly: Bool)
        /// A TLS failure, in OpenSSL's words.
        case failed(String)
    }

    init(takingOwnershipOf ssl: OpaquePointer) { self.ssl = ssl }

    deinit { SSL_free(ssl) }

    /// Drives the handshake on; `.done(0)` once it is complete and the certificate verified.
    func handshake() -> Outcome {
        ERR_clear_error()
        let result = SSL_connect(ssl)
        if result == 1 { return .done(0) }
        switch outcome(of: result) {
        case .closed:
            return .failed("the server closed the connection during the TLS handshake")
        case let other:
            return other
        }
    }

    /// Reads decrypted bytes into `buffer`.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Outcome {
        ERR_clear_error()
        let n = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        return n > 0 ? .done(Int(n)) : outcome(of: n)
    }

    /// Writes (part of) `bytes`.
    func write(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        ERR_clear_error()
        let n = SSL_write(ssl, bytes.baseAddress, Int32(clamping: bytes.count))
        return n > 0 ? .done(Int(n)) : outcome(of: n)
    }

    /// The session with what resuming it needs (a TLS 1.3 ticket arrives after the
    /// handshake), owned by the caller; nil when it cannot be resumed.
    func resumableState() -> OpaquePointer? {
        guard let state = SSL_get1_session(ssl) else { return nil }
        guard SSL_SESSION_is_resumable(state) == 1 else {
            SSL_SESSION_free(state)
            return nil
        }
        return state
    }

    /// Whether the handshake resumed an earlier session.
    var isResumed: Bool { SSL_session_reused(ssl) == 1 }

    /// Whether OpenSSL holds bytes already read from the socket (epoll cannot tell).
    var hasBufferedInput: Bool { SSL_has_pending(ssl) == 1 }

    /// Sends close_notify, best effort, before the socket closes.
    func close() {
        ERR_clear_error()
        SSL_shutdown(ssl)
        ERR_clear_error()
    }

    private func outcome(of result: Int32) -> Outcome {
        let code = SSL_get_error(ssl, result)
        switch code {
        case SSL_ERROR_WANT_READ:
            return .wantRead
        case SSL_ERROR_WANT_WRITE:
            return .wantWrite
        case SSL_ERROR_ZERO_RETURN:
            return .closed(cleanly: true)
        case SSL_ERROR_SYSCALL:
            let systemError = errno
            let queued = ERR_peek_error()
            if queued == 0 && (systemError == 0 || systemError == ECONNRESET || systemError == EPIPE) {
                return .closed(cleanly: false)
            }
            return .failed(queued != 0 ? openSSLErrors() : String(cString: strerror(systemError)))
        default:
            let verification = SSL_get_verify_result(ssl)
            if SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER != 0 && verification != X509_V_OK {
                ERR_clear_error()
                return .failed("certificate verification failed: " + String(cString: X509_verify_cert_error_string(verification)))
            }
            if ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING {
                ERR_clear_error()
                return .closed(cleanly: false)
            }
            return .failed(openSSLErrors())
        }
    }
}
