internal import COpenSSL

/// OpenSSL's per-thread error queue.
enum OpenSSLErrorQueue {
    /// Removes every queued error and returns them as text.
    static func drain() -> [String] {
        var errors: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            errors.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return errors
    }
}
