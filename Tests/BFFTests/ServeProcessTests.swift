import BFFTesting
import Cryptography
import Foundation
import JSON
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `smart-bff serve` as an operator runs it: its stop signals, and its log's reader.
@Suite("serve as a process")
struct ServeProcessTests {
    /// A throwaway database, an issuers file and `serve` on a port of its own, its standard
    /// error to `errorPath` when given.
    private struct Fixture {
        let database: TestDatabase
        let folder: URL
        let bff: SmartBFFProcess

        static func start(errorPath: String? = nil, untilListening: Bool = true,
                          before: (TestDatabase) async throws -> Void = { _ in }) async throws -> Fixture {
            let database = try await TestDatabase.make(poolSize: 2)
            try await before(database)
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let issuers = folder.appendingPathComponent("issuers.json")
            try Data(#"[{"iss": "http://127.0.0.1:9/fhir", "client_id": "test-app"}]"#.utf8).write(to: issuers)
            let port = PortAllocator.next()
            let bff = try SmartBFFProcess.serve(port: port, log: folder.appendingPathComponent("bff.log"), environment: [
                "DATABASE_URL": database.url, "BFF_ISSUERS_FILE": issuers.path,
                "BFF_TOKEN_KEY": Data(SecureRandom.bytes(32)).base64EncodedString(),
                "BFF_MIGRATIONS_DIR": RepositoryPaths.migrations.path,
            ], errorPath: errorPath)
            if untilListening { try await bff.waitUntilListening() }
            return Fixture(database: database, folder: folder, bff: bff)
        }

        func stop() async {
            await bff.stop()
            database.pool.close()
            try? FileManager.default.removeItem(at: folder)
        }

        /// Reads the non-blocking `fd` (a FIFO the process logs to) until `text` has come, up
        /// to 30 s; whether it came.
        static func read(_ fd: Int32, until text: String) async throws -> Bool {
            var seen: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            for _ in 0..<600 {
                let n = Glibc.read(fd, &buffer, buffer.count)
                if n > 0 { seen += buffer[..<n] }
                if String(decoding: seen, as: UTF8.self).contains(text) { return true }
                try await Task.sleep(for: .milliseconds(50))
            }
            return false
        }

        /// `GET /healthz` on a connection of its own: the status, or nil without an answer in 5 s.
        func healthz() async throws -> Int? {
            try await runBlocking { [port = bff.port] () throws -> Int? in
                let client = try RawHTTPClient(port: port, timeout: 5)
                defer { client.close() }
                client.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                return client.readResponse()?.status
            }
        }
    }

    /// A log shipper reads serve's standard error as JSON lines: the lines that stop a start
    /// on a bad setting are JSON too, one per problem, naming the variable.
    @Test("a configuration error stops serve with status 78 and one JSON line per problem, naming its variable")
    func configurationErrorAsJSON() async throws {
        let errors = NSTemporaryDirectory() + "smart-bff-config-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: errors) }
        let process = try ChildProcess(SmartBFFProcess.executable.path, ["serve"],
                                       environment: ["BFF_LOG_LEVEL": "verbose", "BFF_MIGRATIONS_DIR": RepositoryPaths.migrations.path,
                                                     "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"],
                                       outputPath: "/dev/null", errorPath: errors)
        let status = try await runBlocking { process.waitUntilExit() }
        let lines = ((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(status == 78, "\(lines)")
        let parsed = lines.compactMap { try? JSONParser.parse(Array($0.utf8)) }
        #expect(parsed.count == lines.count && !lines.isEmpty, "not JSON: \(lines)")
        #expect(parsed.allSatisfy { $0["msg"]?.stringValue == "configuration error" && $0["level"]?.stringValue == "critical" }, "\(lines)")
        #expect(Set(parsed.compactMap { $0["config.variable"]?.stringValue }) == ["DATABASE_URL", "BFF_ISSUERS_FILE", "BFF_TOKEN_KEY", "BFF_LOG_LEVEL"],
                "\(lines)")
    }

    @Test("a second stop signal (not the same moment's: a closed terminal sends two) closes the connections the drain waits for at once, and the stop still ends cleanly (status 0, last line shut down)")
    func secondSignalHastensTheStop() async throws {
        let f = try await Fixture.start()
        defer { Task { await f.stop() } }
        let bff = f.bff
        // Until it has started (the `serving` line), a signal ends it at once.
        for _ in 0..<600 where !bff.logText.contains("\"serving\"") { try await Task.sleep(for: .milliseconds(50)) }

        // A request whose head is still coming: the drain waits for it (up to 10 s, the grace
        // period and the head's read timeout alike).
        // (A first request answered on the connection: it has been accepted, not left in the
        // listen backlog, which the stop resets.)
        let client = try RawHTTPClient(port: bff.port, timeout: 30)
        defer { client.close() }
        client.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(client.readResponse()?.status == 200)
        client.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        // Two 0.1 s apart are one operator action (a closed terminal sends SIGHUP twice): one
        // stop. (A machine too loaded to send them within 0.3 s has the second count, as it
        // should: then the check below is left out.)
        let first = ContinuousClock.now
        bff.signalStop()
        try await Task.sleep(for: .milliseconds(100))
        bff.signalStop()
        let apart = ContinuousClock.now - first
        for _ in 0..<100 where !bff.logText.contains("\"draining\"") { try await Task.sleep(for: .milliseconds(50)) }
        let early = try await bff.exitStatus(within: .seconds(1)) // and the next signal is a second action
        if apart < .milliseconds(300) { #expect(early == nil, "the first signal waits for the request: \(bff.logTail)") }

        bff.signalStop()
        let status = try await bff.exitStatus(within: .seconds(5))
        #expect(status == 0, "stopped within 5 s of the second signal, cleanly: \(bff.logTail)")
        #expect(bff.logText.contains("second stop signal: closing open connections now"), "\(bff.logTail)")
        let last = bff.logText.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.contains("\"shut down\"") && last.contains("\"audit.lost_entries\":\"0\""), "\(last)")
    }

    @Test("a stop signal while serve has not started (migrations waiting for their lock) ends it at once, status 143")
    func signalDuringStart() async throws {
        // Held by a pooled connection of the test's: the migration in serve waits for it.
        let f = try await Fixture.start(untilListening: false) { database in
            _ = try await database.pool.query("SELECT pg_advisory_lock(\(0x5_3B_FF_01))")
        }
        defer { Task { await f.stop() } }
        for _ in 0..<600 where !f.bff.logText.contains("waiting for the migration lock") { try await Task.sleep(for: .milliseconds(50)) }
        #expect(f.bff.logText.contains("waiting for the migration lock"), "\(f.bff.logTail)")
        f.bff.signalStop()
        #expect(try await f.bff.exitStatus(within: .seconds(5)) == 143, "\(f.bff.logTail)")
    }

    @Test("a log reader that stops reading (a full pipe) holds nothing up: every request is answered, and a stop still ends the process")
    func stalledLogReader() async throws {
        let fifo = NSTemporaryDirectory() + "smart-bff-stderr-\(UUID().uuidString)"
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unlink(fifo) }
        let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC) // held open, never read: the pipe fills (64 KiB)
        defer { close(reader) }
        let f = try await Fixture.start(errorPath: fifo)
        defer { Task { await f.stop() } }
        #expect(try await Fixture.read(reader, until: "\"serving\""), "no serving line")
        // A request line is about 230 bytes: 600 of them are twice what the pipe holds.
        var answered = 0
        while answered < 600, try await f.healthz() == 200 { answered += 1 }
        #expect(answered == 600)
        f.bff.signalStop()
        #expect(try await f.bff.exitStatus(within: .seconds(15)) != nil, "a stop with lines it cannot write")
    }

    @Test("a log reader that goes away (a closed pipe) ends nothing: requests go on being answered, and the stop is clean")
    func closedLogReader() async throws {
        let fifo = NSTemporaryDirectory() + "smart-bff-stderr-\(UUID().uuidString)"
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unlink(fifo) }
        let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        let f = try await Fixture.start(errorPath: fifo)
        defer { Task { await f.stop() } }
        #expect(try await Fixture.read(reader, until: "\"serving\""), "no serving line")
        #expect(try await f.healthz() == 200)
        close(reader) // every write now fails with EPIPE
        var answered = 0
        while answered < 50, (try? await f.healthz()) == 200 { answered += 1 }
        #expect(answered == 50)
        #expect(f.bff.isRunning)
        f.bff.signalStop()
        #expect(try await f.bff.exitStatus(within: .seconds(15)) == 0)
    }
}
