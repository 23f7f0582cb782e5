import Foundation
import PostgresStore
import Testing

@Suite("Subprocess")
struct SubprocessTests {
    /// `pg_ctl start` leaves a server running; it must not hold our descriptors (an
    /// upstream connection, a client's socket) for its lifetime. A pipe stands in for them:
    /// its reader sees the end only once no process holds the write end.
    @Test("a program left running by a started command holds none of our descriptors")
    func daemonsInheritNothing() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0) // without O_CLOEXEC, as C libraries often open theirs
        let log = NSTemporaryDirectory() + "smart-bff-subprocess-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        try Subprocess.run("/bin/sh", ["-c", "sleep 30 & echo $!"], logPath: log)
        let sleeper = pid_t((try String(contentsOfFile: log, encoding: .utf8)).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        defer { if sleeper > 0 { kill(sleeper, SIGKILL) } }
        close(ends[1])
        defer { close(ends[0]) }
        var reader = pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0)
        let ended = poll(&reader, 1, 5_000) == 1
        #expect(ended, "the background program kept the pipe's write end open")
        var byte: UInt8 = 0
        if ended { #expect(read(ends[0], &byte, 1) == 0) }
    }
}
