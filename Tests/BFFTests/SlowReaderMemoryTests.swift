import BFFTesting
import Foundation
import Testing

/// What a client that sends and does not read costs the server in memory: an attacker with
/// many connections must not make a container (256 MiB in deploy/kubernetes) run out.
@Suite("memory held for clients that do not read")
struct SlowReaderMemoryTests {
    @Test("clients that pipeline requests and read none of the answers make the server hold well under 100 KiB each (174 KiB before the bound), not the quarter megabyte a streamed body may buffer")
    func pipeliningNonReadersHoldLittle() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("slow-readers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let port = PortAllocator.next()
        // The sandbox EHR runs on the same HTTP server, in a process of its own to measure.
        let server = try SmartBFFProcess.start(["sandbox", "--port", "\(port)"], port: port, log: folder.appendingPathComponent("sandbox.log"))
        defer { Task { await server.stop() } }
        try await server.waitUntilListening()
        let count = 300
        let before = try Self.residentKiB(server.pid)
        let sockets = try await runBlocking { () throws -> [Int32] in
            let requests = Array(String(repeating: "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", count: 2000).utf8) // 68 KB
            return try (0..<count).map { _ in
                let fd = try Self.connectNotReading(port: port)
                // Twice: what the server reads ahead, and more than the kernel's buffers take.
                for _ in 0..<2 { _ = requests.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) } }
                return fd
            }
        }
        defer { for fd in sockets { close(fd) } }
        try await Task.sleep(for: .seconds(2)) // the server answers what it will, then waits for the readers
        let perConnection = (try Self.residentKiB(server.pid) - before) / count
        #expect(perConnection < 100, "\(perConnection) KiB per connection that reads nothing")
        // Still serving.
        let answered = try await runBlocking { () -> Int? in
            let client = try RawHTTPClient(port: port, timeout: 30)
            defer { client.close() }
            client.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            return client.readResponse()?.status
        }
        #expect(answered == 200)
    }

    /// A connected socket whose receive buffer is as small as the kernel allows: a client
    /// that reads nothing and lets almost nothing be sent to it.
    private static func connectNotReading(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var size: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
        return fd
    }

    /// The resident set of process `pid`, in KiB.
    private static func residentKiB(_ pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
}
