@testable import BFF
import BFFTesting
import Foundation
import Logging
import PostgresStore
import Synchronization
import Testing

/// How a database outage reaches the log (the pool's reports, on a clock of the test's).
@Suite("database failure log")
struct DatabaseFailureLogTests {
    @Test("an outage is one line, a summary a minute, and one line at the same level once work is served with no failure for 30 s; work served between failures (a read-only server, a locked table) ends nothing")
    func outageLines() async throws {
        let clock = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        let logs = LogSink()
        let log = DatabaseFailureLog(logger: Logger(label: "db") { JSONLogHandler(label: $0, sink: logs) }, now: { clock.withLock { $0 } })
        func advance(_ seconds: TimeInterval) { clock.withLock { $0 += seconds } }
        func lines(_ text: String) -> Int { logs.captured.filter { $0.contains(text) }.count }
        let error = try await Self.refusal()

        log.served() // nothing open: nothing said
        log.failed(error)
        for _ in 0..<20 { // reads served, writes refused, a second apart
            advance(1)
            log.served()
            log.failed(error)
        }
        #expect(lines("the database cannot serve requests") == 1)
        #expect(lines("serves requests again") == 0, "work served between failures was taken for a recovery")
        advance(45) // past a minute since the first line
        log.failed(error)
        #expect(lines("the database still cannot serve requests") == 1)
        advance(29)
        log.served()
        #expect(lines("serves requests again") == 0, "29 s without a failure is not yet quiet")
        advance(1)
        log.served()
        log.served()
        #expect(lines("serves requests again") == 1)
        #expect(logs.captured.last?.contains("\"db.failures\":\"22\"") == true, "\(logs.captured.last ?? "")")
        // At the outage's level: a log kept at warning or error shows the end as it showed the start.
        #expect(logs.captured.filter { $0.contains("\"level\":\"error\"") }.count == logs.captured.count, "\(logs.captured)")
        log.failed(error) // a new outage: its own first line
        #expect(lines("the database cannot serve requests") == 2)
    }

    /// A real transient error: a connection refused by a server that is not there.
    static func refusal() async throws -> PostgresError {
        let pool = ConnectionPool(url: "postgresql://nobody@127.0.0.1:\(try LoopbackSocket.unusedPort())/none?connect_timeout=5")
        defer { pool.close() }
        do {
            try await pool.query("SELECT 1")
        } catch let error as PostgresError {
            return error
        }
        throw CancellationError()
    }
}
