import BFFTesting
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A plain-TCP front for the sandbox EHR that answers requests for one path itself, with
/// bytes the sandbox's server would never send, and relays every other request to the
/// sandbox. Each connection carries one request: the sandbox is asked to close after its
/// answer, which then says so, and the client opens a new connection for the next request.
/// Give the sandbox `url` as its public base URL, then `forward(to:)` its port.
final class RiggedEHRFront: Sendable {
    private let listener: ThreadedListener
    private let path: String
    private let answer: @Sendable (_ method: String, _ head: String) -> [UInt8]
    private let hold: Double
    private let drip: [UInt8]
    private let backendPort = Atomic<Int>(0)
    private let answers = Counter()

    /// Requests for `path` answered so far (counted as their answer is sent).
    var answered: Int { answers.current }

    /// `http://127.0.0.1:<port>`.
    var url: String { "http://127.0.0.1:\(listener.port)" }

    /// `answer` gives the bytes sent for a request (GET or HEAD) whose target is `path`; the
    /// connection then stays open for `hold` seconds, silent (an EHR that stops sending), or
    /// sending `drip` every 200 ms (an EHR that is slow but alive).
    convenience init(path: String, hold: Double = 0, drip: [UInt8] = [], answer: @escaping @Sendable (_ method: String) -> [UInt8]) throws {
        try self.init(path: path, hold: hold, drip: drip, answerTo: { method, _ in answer(method) })
    }

    /// As above; `answerTo` also gets the request's head (its request line and fields).
    init(path: String, hold: Double = 0, drip: [UInt8] = [], answerTo answer: @escaping @Sendable (_ method: String, _ head: String) -> [UInt8]) throws {
        self.path = path
        self.answer = answer
        self.hold = hold
        self.drip = drip
        listener = try ThreadedListener()
        listener.start { [self] client in serve(client) }
    }

    /// Where the other requests go: the sandbox's port.
    func forward(to port: Int) { backendPort.store(port, ordering: .releasing) }

    /// Stops accepting and ends every connection.
    func shutdown() { listener.shutdown() }

    private func serve(_ client: Int32) {
        guard let head = readHead(client) else { return }
        let requestLine = String(decoding: head.prefix { $0 != 13 }, as: UTF8.self).split(separator: " ")
        if requestLine.count == 3, requestLine[1] == path {
            let bytes = answer(String(requestLine[0]), String(decoding: head, as: UTF8.self))
            answers.increment() // before the bytes go: the BFF may answer the browser before this thread runs again
            _ = LoopbackSocket.sendAll(client, bytes[...])
            let end = Date().addingTimeInterval(hold)
            while Date() < end {
                Thread.sleep(forTimeInterval: drip.isEmpty ? hold : 0.2)
                if !drip.isEmpty && !LoopbackSocket.sendAll(client, drip[...]) { return }
            }
            return
        }
        guard let backend = try? LoopbackSocket.connect(port: backendPort.load(ordering: .acquiring)) else { return }
        listener.track(backend)
        defer { listener.untrack(backend) }
        let closing = head.dropLast(2) + Array("Connection: close\r\n\r\n".utf8) // any body follows through the relay
        guard LoopbackSocket.sendAll(backend, closing) else { return }
        LoopbackSocket.relay(client, backend)
    }

    /// The request head, up to and with its empty line.
    private func readHead(_ fd: Int32) -> [UInt8]? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < 16_384 {
            guard recv(fd, &byte, 1, 0) == 1 else { return nil }
            bytes.append(byte)
            if bytes.suffix(4) == [13, 10, 13, 10] { return bytes }
        }
        return nil
    }
}

extension BFFHarness {
    /// A BFF whose EHR is `front` (which relays all but its own path to the sandbox), and a
    /// browser signed in through it: the harness (stop it), the browser and its launch.
    static func signedIn(behind front: RiggedEHRFront, readTimeout: Duration = .seconds(30)) async throws -> (BFFHarness, Browser, String) {
        let h = try await BFFHarness.start(readTimeout: readTimeout, sandbox: { $0.publicBaseURL = front.url })
        front.forward(to: h.sandbox.port)
        let browser = Browser(client: h.client)
        do {
            let launch = try #require(try await h.standaloneLogin(browser).launch)
            return (h, browser, launch)
        } catch {
            await h.stop()
            throw error
        }
    }
}

