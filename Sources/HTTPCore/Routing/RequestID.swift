import Synchronization

/// Request ids: a caller's `X-Request-ID` when it is short and plain, otherwise a random one.
enum RequestID {
    static func make(from incoming: String?) -> String {
        if let incoming, (1...64).contains(incoming.utf8.count),
           incoming.utf8.allSatisfy({ ByteClass.requestID[Int($0)] }) {
            return incoming
        }
        return generator.next()
    }

    /// A random per-process prefix and a counter: unique across instances without a
    /// system call per request.
    static let generator = Generator()

    final class Generator: Sendable {
        private let prefix: String
        private let counter = Atomic<UInt64>(0)

        init() {
            var rng = SystemRandomNumberGenerator()
            let hex = String(rng.next() as UInt32, radix: 16)
            prefix = String(repeating: "0", count: 8 - hex.count) + hex + "-"
        }

        func next() -> String {
            let n = counter.add(1, ordering: .relaxed).newValue
            return prefix + String(n, radix: 16)
        }
    }
}

