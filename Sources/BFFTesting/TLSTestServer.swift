internal import CLibSSL
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A test-only TLS server on 127.0.0.1 (an ephemeral port), real OpenSSL: it completes
/// handshakes with a fixed certificate and forwards the decrypted bytes to a plain TCP port
/// on 127.0.0.1, and the answers back, so any of the tests' HTTP servers can be reached over
/// https. One thread per connection, blocking calls.
///
/// It ignores SIGPIPE process-wide (writing to a peer that has gone must not end the tests).
public final class TLSTestServer: Sendable {
    private let listener: ThreadedListener
    private let context: Mutex<SSLContext>
    private let backendPort = Atomic(0)
    private let recordLimit = Atomic(16_384)
    private let completed = Atomic(0)
    private let refused = Atomic(0)
    private let resumed = Atomic(0)
    private let protocols = Mutex<[String]>([])
    private let names = Mutex<[String]>([])

    public var port: Int { listener.port }
    /// Handshakes that completed (the client accepted the certificate).
    public var completedHandshakes: Int { completed.load(ordering: .acquiring) }
    /// Handshakes that did not (the client refused the certificate, or went away).
    public var refusedHandshakes: Int { refused.load(ordering: .acquiring) }
    /// Completed handshakes that resumed an earlier session (no certificate sent again).
    public var resumedHandshakes: Int { resumed.load(ordering: .acquiring) }
    /// The application protocol each completed handshake agreed on (ALPN: "h2" when the
    /// client offered it, as HTTP/2-capable servers answer; else "http/1.1"; "" without ALPN).
    /// Only HTTP/1.1 is relayed meaningfully: the backends are HTTP/1.1 servers.
    public var negotiatedProtocols: [String] { protocols.withLock { $0 } }
    /// The server name (SNI) each completed handshake asked for; "" when it sent none.
    public var serverNames: [String] { names.withLock { $0 } }

    /// Listens with `identity`'s certificate and key; connections wait for `forward(to:)`.
    /// With `tls12Ciphers`, it speaks TLS 1.2 at most, with only those cipher suites.
    public init(identity: TestCertificates.Identity, tls12Ciphers: String? = nil) throws {
        signal(SIGPIPE, SIG_IGN)
        context = Mutex(try SSLContext(identity: identity, tls12Ciphers: tls12Ciphers))
        listener = try ThreadedListener()
        listener.start { [self] client in serve(client) }
    }

    /// From now on, connections go on to `port` on 127.0.0.1.
    public func forward(to port: Int) { backendPort.store(port, ordering: .releasing) }

    /// From now on, what the backend sends goes out in TLS records of at most `bytes` bytes,
    /// written back to back (so that a client finds several in its socket at once).
    public func limitRecords(to bytes: Int) { recordLimit.store(max(1, bytes), ordering: .releasing) }

    /// Handshakes from now on present `identity`; open connections end (so that clients
    /// must make new ones).
    public func present(_ identity: TestCertificates.Identity) throws {
        let next = try SSLContext(identity: identity)
        context.withLock { $0 = next }
        listener.endConnections()
    }

    /// Stops accepting and ends every connection.
    public func shutdown() { listener.shutdown() }

    private func serve(_ client: Int32) {
        guard let ssl = context.withLock({ SSL_new($0.pointer) }) else { return }
        defer { SSL_free(ssl) }
        SSL_set_fd(ssl, client)
        guard SSL_accept(ssl) == 1 else {
            refused.add(1, ordering: .acquiringAndReleasing)
            return
        }
        completed.add(1, ordering: .acquiringAndReleasing)
        if SSL_session_reused(ssl) == 1 { resumed.add(1, ordering: .acquiringAndReleasing) }
        var selected: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &selected, &length)
        let name = selected.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(length)), as: UTF8.self) } ?? ""
        protocols.withLock { $0.append(name) }
        let serverName = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { String(cString: $0) } ?? ""
        names.withLock { $0.append(serverName) }
        guard let backend = try? LoopbackSocket.connect(port: backendPort.load(ordering: .acquiring)) else { return }
        listener.track(backend)
        defer { listener.untrack(backend) }
        relay(ssl, client: client, backend: backend)
        SSL_shutdown(ssl)
    }

    /// Copies bytes both ways until either side closes.
    private func relay(_ ssl: OpaquePointer, client: Int32, backend: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: backend, events: Int16(POLLIN), revents: 0)]
        while true {
            // OpenSSL may hold decrypted bytes already read from the socket: poll would not see them.
            if SSL_pending(ssl) == 0 {
                guard poll(&fds, 2, -1) > 0 else { if errno == EINTR { continue } else { return } }
            }
            if SSL_pending(ssl) > 0 || fds[0].revents != 0 {
                let n = buffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
                guard n > 0, LoopbackSocket.sendAll(backend, buffer[..<Int(n)]) else { return }
            }
            if fds[1].revents != 0 {
                let n = buffer.withUnsafeMutableBytes { recv(backend, $0.baseAddress, $0.count, 0) }
                guard n > 0 else { return }
                var offset = 0
                while offset < n {
                    let size = min(n - offset, recordLimit.load(ordering: .acquiring))
                    let written = buffer.withUnsafeBytes { SSL_write(ssl, $0.baseAddress! + offset, Int32(size)) }
                    guard written == Int32(size) else { return }
                    offset += size
                }
            }
            fds[0].revents = 0
            fds[1].revents = 0
        }
    }
}

/// An OpenSSL server context with one certificate and key. OpenSSL allows `SSL_new` on one
/// context from many threads once it is set up; nothing changes it afterwards.
private final class SSLContext: @unchecked Sendable {
    let pointer: OpaquePointer

    struct SetupError: Error, CustomStringConvertible {
        let step: String
        var description: String { "TLS test server: \(step) failed" }
    }

    init(identity: TestCertificates.Identity, tls12Ciphers: String? = nil) throws {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw SetupError(step: "SSL_CTX_new") }
        pointer = context
        if let tls12Ciphers {
            guard bff_ssl_ctx_set_max_tls12(context) == 1, SSL_CTX_set_cipher_list(context, tls12Ciphers) == 1 else {
                throw SetupError(step: "limiting the cipher suites")
            }
        }
        guard let certificate = Self.read(identity.certificatePEM, { PEM_read_bio_X509($0, nil, nil, nil) }) else {
            throw SetupError(step: "reading the certificate")
        }
        defer { X509_free(certificate) }
        guard let key = Self.read(identity.privateKeyPEM, { PEM_read_bio_PrivateKey($0, nil, nil, nil) }) else {
            throw SetupError(step: "reading the key")
        }
        defer { EVP_PKEY_free(key) }
        guard SSL_CTX_use_certificate(context, certificate) == 1, SSL_CTX_use_PrivateKey(context, key) == 1,
              SSL_CTX_check_private_key(context) == 1 else { throw SetupError(step: "loading the certificate and key") }
        bff_ssl_ctx_offer_h2(context)
    }

    deinit { SSL_CTX_free(pointer) }

    /// One PEM object from `text`, read from a memory BIO by `reader`.
    private static func read(_ text: String, _ reader: (OpaquePointer) -> OpaquePointer?) -> OpaquePointer? {
        text.withCString { chars -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(chars, -1) else { return nil }
            defer { BIO_free(bio) }
            return reader(bio)
        }
    }
}
