internal import COpenSSL

/// Converts ECDSA signatures between DER (OpenSSL) and raw r ‖ s (JWS, RFC 7518 §3.4).
enum ECDSASignature {
    static func raw(fromDER der: [UInt8], width: Int) -> [UInt8]? {
        var pointer: UnsafePointer<UInt8>? = nil
        return der.withUnsafeBufferPointer { buffer -> [UInt8]? in
            pointer = buffer.baseAddress
            guard let sig = d2i_ECDSA_SIG(nil, &pointer, buffer.count) else { return nil }
            defer { ECDSA_SIG_free(sig) }
            var r: OpaquePointer?, s: OpaquePointer?
            ECDSA_SIG_get0(sig, &r, &s)
            var out = [UInt8](repeating: 0, count: width * 2)
            guard let r, let s,
                  out.withUnsafeMutableBufferPointer({ BN_bn2binpad(r, $0.baseAddress, Int32(width)) }) == width,
                  out.withUnsafeMutableBufferPointer({ BN_bn2binpad(s, $0.baseAddress! + width, Int32(width)) }) == width
            else { return nil }
            return out
        }
    }

    static func der(fromRaw raw: [UInt8], width: Int) -> [UInt8]? {
        guard raw.count == width * 2, let sig = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(sig) }
        guard let r = BN_bin2bn(raw, Int32(width), nil) else { return nil }
        guard let s = raw.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress! + width, Int32(width), nil) }) else {
            BN_free(r)
            return nil
        }
        // ECDSA_SIG_set0 takes ownership of r and s.
        guard ECDSA_SIG_set0(sig, r, s) == 1 else { BN_free(r); BN_free(s); return nil }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(sig, &out)
        guard length > 0, let out else { return nil }
        defer { bff_openssl_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
