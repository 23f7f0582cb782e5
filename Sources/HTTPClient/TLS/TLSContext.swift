internal import CLibSSL
import Synchronization

/// One OpenSSL client context (`SSL_CTX`) for a client's https connections: TLS 1.2 or
/// newer, ALPN offering HTTP/1.1 only, and, unless verification is off, certificates checked
/// against the system's CA store (or one PEM file in its place) and host names checked
/// against the certificate (`TLSSession`). The last resumable session of each host and port
/// is kept, so that a new connection to an upstream that closes connections often resumes
/// instead of doing a full handshake. A TLS 1.3 ticket may so resume more than one connection
/// (RFC 8446 C.4 advises against it, for privacy): taking each ticket once made every other
/// reconnect a full handshake (OpenSSL servers issue no new ticket on a resumed connection),
/// and connections from one server to one EHR are linked by their addresses anyway.
///
/// OpenSSL allows `SSL_new` on a context from any thread once it is set up; nothing changes
/// it afterwards; the sessions sit behind a mutex. Hence `@unchecked Sendable`.
final class TLSContext: @unchecked Sendable {
    /// The context, or why there is none (an unreadable CA file, say): then every https
    /// request fails with that TLS error.
    private let context: Result<OpaquePointer, HTTPClientError>
    let verifies: Bool
    private let sessions = Mutex<[String: SavedSession]>([:])

    /// A session to resume (`SSL_SESSION *`), freed when no longer kept.
    private final class SavedSession: @unchecked Sendable {
        let pointer: OpaquePointer
        init(takingOwnershipOf pointer: OpaquePointer) { self.pointer = pointer }
        deinit { SSL_SESSION_free(pointer) }
    }

    /// The method table of the socket BIO that never raises SIGPIPE, made once per process
    /// and never changed or freed.
    private struct SocketMethod: @unchecked Sendable { let pointer: OpaquePointer? }
    private static let socketMethod = SocketMethod(pointer: bff_nosigpipe_method_new())

    /// How a host name is matched against the certificate: its subjectAltNames only, never
    /// the subject's CN (RFC 9525 §6; browsers and Go do the same), and a wildcard only as
    /// a whole left-most label.
    static let hostFlags = UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT)

    init(verify: Bool, caCertificatesFile: String?) {
        verifies = verify
        context = TLSContext.make(verify: verify, caCertificatesFile: caCertificatesFile)
    }

    deinit {
        if case let .success(pointer) = context { SSL_CTX_free(pointer) }
    }

    /// TLS 1.2's cipher suites: forward secrecy (ECDHE, DHE) and AEAD only, Mozilla's
    /// "intermediate" list. OpenSSL's default would also take static-RSA key exchange and
    /// CBC with SHA-1, which a server (or one in the middle) could choose. TLS 1.3's suites
    /// are all of that kind and stay OpenSSL's.
    static let tls12Ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
        + "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
        + "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305"

    private static func make(verify: Bool, caCertificatesFile: String?) -> Result<OpaquePointer, HTTPClientError> {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else { return .failure(.tls("SSL_CTX_new failed: \(openSSLErrors())")) }
        var ready = false
        defer { if !ready { SSL_CTX_free(context) } }
        guard bff_ssl_ctx_set_min_tls12(context) == 1 else { return .failure(.tls("cannot require TLS 1.2: \(openSSLErrors())")) }
        guard SSL_CTX_set_cipher_list(context, TLSContext.tls12Ciphers) == 1 else {
            return .failure(.tls("cannot set the TLS 1.2 cipher suites: \(openSSLErrors())"))
        }
        bff_ssl_ctx_set_write_modes(context)
        bff_ssl_ctx_set_read_ahead(context)
        bff_ssl_ctx_refuse_renegotiation(context)
        let alpn: [UInt8] = [8] + Array("http/1.1".utf8)
        guard SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0 else { return .failure(.tls("cannot set ALPN")) }
        if verify {
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            if let file = caCertificatesFile {
                // Only this file: not the system's directory of certificates as well.
                guard SSL_CTX_load_verify_locations(context, file, nil) == 1 else {
                    return .failure(.tls("cannot load the CA certificates file: \(openSSLErrors())"))
                }
            } else {
                guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                    return .failure(.tls("cannot load the system's CA certificates: \(openSSLErrors())"))
                }
            }
        } else {
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        }
        ready = true
        return .success(context)
    }

    /// A TLS session over connected socket `fd` for `host` (its name goes in SNI and must be
    /// the certificate's; an address must be in the certificate's IP entries), resuming the
    /// session kept for `key` (host and port) if there is one.
    func makeSession(fd: Int32, host: String, isIPAddress: Bool, key: String) throws(HTTPClientError) -> TLSSession {
        let context = try self.context.get()
        ERR_clear_error()
        guard let method = TLSContext.socketMethod.pointer, let ssl = SSL_new(context) else { throw .tls("SSL_new failed: \(openSSLErrors())") }
        guard let bio = bff_nosigpipe_bio_new(method, fd) else {
            SSL_free(ssl)
            throw .tls("BIO_new failed")
        }
        SSL_set_bio(ssl, bio, bio) // the session owns the BIO now
        let session = TLSSession(takingOwnershipOf: ssl)
        // A fully qualified name's final dot is not part of the name in SNI or a certificate.
        let name = !isIPAddress && host.hasSuffix(".") ? String(host.dropLast()) : host
        if !isIPAddress { // no SNI for addresses (RFC 6066 §3)
            guard bff_ssl_set_server_name(ssl, name) == 1 else { throw .tls("cannot send the host name (SNI): \(openSSLErrors())") }
        }
        if verifies {
            let ok = isIPAddress ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
                                 : { SSL_set_hostflags(ssl, TLSContext.hostFlags); return SSL_set1_host(ssl, name) }()
            guard ok == 1 else { throw .tls("cannot set the host name to verify: \(openSSLErrors())") }
        }
        if let saved = sessions.withLock({ $0[key] }) { SSL_set_session(ssl, saved.pointer) } // takes its own reference
        SSL_set_connect_state(ssl)
        return session
    }
}

extension TLSContext {
    /// Keeps `session`'s resumable state for the next connection to `key`.
    func remember(_ session: TLSSession, for key: String) {
        guard let pointer = session.resumableState() else { return }
        let saved = SavedSession(takingOwnershipOf: pointer)
        let previous = sessions.withLock { $0.updateValue(saved, forKey: key) }
        _ = previous // freed here, outside the lock
    }
}

/// OpenSSL's error queue of this thread as text (emptied), or "no detail".
func openSSLErrors() -> String {
    var texts: [String] = []
    var buffer = [CChar](repeating: 0, count: 256)
    while case let code = ERR_get_error(), code != 0 {
        ERR_error_string_n(code, &buffer, buffer.count)
        texts.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return texts.isEmpty ? "no detail" : texts.joined(separator: "; ")
}
