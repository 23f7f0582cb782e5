import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A test-only forward proxy on 127.0.0.1 that accepts only `CONNECT` (the tunnel clients
/// use for https), as hospital egress proxies do: it answers 200, then relays bytes both
/// ways. Anything else gets 405. One thread per connection, blocking calls.
public final class ConnectProxy: Sendable {
    private let listener: ThreadedListener
    private let targets = Mutex<[String]>([])

    public var port: Int { listener.port }
    /// The `host:port` of every CONNECT received, in order.
    public var tunnels: [String] { targets.withLock { $0 } }
    /// `http://127.0.0.1:<port>`, for a client's proxy setting.
    public var url: String { "http://127.0.0.1:\(port)" }

    public init() throws {
        signal(SIGPIPE, SIG_IGN)
        listener = try ThreadedListener()
        listener.start { [self] client in serve(client) }
    }

    /// Stops accepting and ends every tunnel.
    public func shutdown() { listener.shutdown() }

    private func serve(_ client: Int32) {
        guard let head = readHead(client) else { return }
        let words = head.components(separatedBy: "\r\n")[0].split(separator: " ")
        guard words.count == 3, words[0] == "CONNECT", let colon = words[1].lastIndex(of: ":"),
              let port = Int(words[1][words[1].index(after: colon)...]) else {
            _ = send(client, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        targets.withLock { $0.append(String(words[1])) }
        // Tests' upstreams are local: every host name goes to 127.0.0.1.
        guard let upstream = try? LoopbackSocket.connect(port: port) else {
            _ = send(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        listener.track(upstream)
        defer { listener.untrack(upstream) }
        guard send(client, "HTTP/1.1 200 Connection established\r\nProxy-Agent: smart-bff-test-proxy\r\n\r\n") else { return }
        LoopbackSocket.relay(client, upstream)
    }

    /// The request head, up to the blank line (a CONNECT has no body).
    private func readHead(_ fd: Int32) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < 8192 {
            guard recv(fd, &byte, 1, 0) == 1 else { return nil }
            bytes.append(byte)
            if bytes.count >= 4, bytes.suffix(4) == [13, 10, 13, 10] { return String(decoding: bytes, as: UTF8.self) }
        }
        return nil
    }

    private func send(_ fd: Int32, _ text: String) -> Bool { LoopbackSocket.sendAll(fd, Array(text.utf8)[...]) }
}
