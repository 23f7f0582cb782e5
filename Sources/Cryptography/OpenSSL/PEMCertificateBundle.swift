internal import COpenSSL

/// A PEM file of X.509 certificates, such as a CA bundle, read the way OpenSSL reads one
/// for verification (`X509_load_cert_crl_file`).
public enum PEMCertificateBundle {
    /// The number of certificates in `pem`: 0 when it holds none, nil when OpenSSL cannot
    /// read it (a malformed PEM block fails the whole file, as it would fail verification).
    public static func certificateCount(_ pem: [UInt8]) -> Int? {
        defer { _ = OpenSSLErrorQueue.drain() }
        return pem.withUnsafeBytes { bytes -> Int? in
            guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(clamping: bytes.count)) else { return nil }
            defer { BIO_free(bio) }
            guard let stack = PEM_X509_INFO_read_bio(bio, nil, nil, nil) else { return nil }
            defer { OPENSSL_sk_pop_free(stack, { X509_INFO_free($0?.assumingMemoryBound(to: X509_INFO.self)) }) }
            var count = 0
            for index in 0..<OPENSSL_sk_num(stack) {
                if OPENSSL_sk_value(stack, index)?.assumingMemoryBound(to: X509_INFO.self).pointee.x509 != nil { count += 1 }
            }
            return count
        }
    }
}
