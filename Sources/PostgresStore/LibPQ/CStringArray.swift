import Foundation

/// Scoped C string arrays for libpq's keyword/value and parameter arrays: every buffer is
/// allocated here and freed before `with` returns, so no pointer escapes.
enum CStringArray {
    /// A NULL-terminated array of C strings that lives for the duration of `body`.
    static func with<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        defer { for p in pointers { free(p) } }
        let array = pointers.map { UnsafePointer($0) } + [nil]
        return array.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}

/// The values, lengths and formats arrays of `PQexecParams`/`PQexecPrepared`, allocated for
/// the duration of one call. Text values are NUL-terminated (format 0); `bytea` values are
/// sent as raw bytes (format 1) with their length; NULL is a null pointer.
enum ParameterBuffers {
    static func with<R>(_ binds: [PostgresValue],
                        _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> R) -> R {
        var buffers: [UnsafeMutablePointer<CChar>?] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        buffers.reserveCapacity(binds.count)
        defer { for b in buffers { free(b) } }
        for bind in binds {
            switch bind.wire {
            case .null:
                buffers.append(nil); lengths.append(0); formats.append(0)
            case let .text(text):
                buffers.append(strdup(text)); lengths.append(0); formats.append(0)
            case let .binary(bytes):
                let buffer = malloc(max(bytes.count, 1))!.assumingMemoryBound(to: CChar.self)
                bytes.withUnsafeBytes { raw in
                    if let base = raw.baseAddress { memcpy(buffer, base, bytes.count) }
                }
                buffers.append(buffer); lengths.append(Int32(bytes.count)); formats.append(1)
            }
        }
        let values = buffers.map { UnsafePointer($0) }
        return values.withUnsafeBufferPointer { v in
            lengths.withUnsafeBufferPointer { l in
                formats.withUnsafeBufferPointer { f in body(Int32(binds.count), v.baseAddress, l.baseAddress, f.baseAddress) }
            }
        }
    }
}
