import BFFTesting
import Foundation

/// A `smart-bff` process, started from the executable beside the test bundle (the package's
/// build folder: `swift build --product smart-bff` builds it; scripts/test does).
final class SmartBFFProcess: Sendable {
    let port: Int
    let log: URL
    private let process: ChildProcess

    var baseURL: String { "http://127.0.0.1:\(port)" }
    var pid: Int32 { process.pid }

    private init(port: Int, log: URL, process: ChildProcess) {
        (self.port, self.log, self.process) = (port, log, process)
    }

    /// The `smart-bff` executable beside the test bundle.
    static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("smart-bff")
    }

    /// `smart-bff serve` on `port`, configured by `environment` and the port; standard error
    /// to `errorPath` when given, else to `log` too.
    static func serve(port: Int, log: URL, environment: [String: String], errorPath: String? = nil) throws -> SmartBFFProcess {
        try start(["serve"], port: port, log: log, environment: environment.merging(
            ["BFF_LISTEN": "127.0.0.1:\(port)", "BFF_PUBLIC_URL": "http://127.0.0.1:\(port)"]) { $1 }, errorPath: errorPath)
    }

    /// `smart-bff <arguments>`, listening on `port`; with `openFileLimit`, under that limit
    /// on open descriptors (soft and hard: the process cannot raise it).
    static func start(_ arguments: [String], port: Int, log: URL, environment: [String: String] = [:],
                      openFileLimit: Int? = nil, errorPath: String? = nil) throws -> SmartBFFProcess {
        let executable = SmartBFFProcess.executable
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw Failure(what: "\(executable.path): build the smart-bff product first (scripts/test does)")
        }
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let environment = environment.merging(["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]) { $1 }
        let process = if let openFileLimit {
            // The shell sets the limit and becomes smart-bff (same process id).
            try ChildProcess("/bin/sh", ["-c", "ulimit -n \(openFileLimit) && exec \"$0\" \"$@\"", executable.path] + arguments,
                             environment: environment, outputPath: log.path, program: executable.path)
        } else {
            try ChildProcess(executable.path, arguments, environment: environment, outputPath: log.path, errorPath: errorPath)
        }
        return SmartBFFProcess(port: port, log: log, process: process)
    }

    /// Waits (up to 60 s, for a loaded machine) until the process accepts connections; fails
    /// at once if it exited (a configuration problem: its log says which).
    func waitUntilListening() async throws {
        for _ in 0..<600 {
            guard process.isRunning else { throw Failure(what: "smart-bff on port \(port) exited: \(logTail)") }
            if let fd = try? LoopbackSocket.connect(port: port) {
                close(fd)
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw Failure(what: "smart-bff on port \(port) did not listen within 60 s: \(logTail)")
    }

    /// The CPU time (user and system) it has used, from /proc.
    var cpuSeconds: Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Its log so far.
    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// The end of its log, for failure messages.
    var logTail: String { String(logText.suffix(2_000)) }

    /// Stops it as an operator would (SIGTERM: a graceful shutdown) and waits for it, on a
    /// thread of its own: a blocked thread of the concurrency pool (two on two cores) would
    /// hold up every other test's tasks while the process drains.
    func stop() async {
        guard process.isRunning else { return }
        process.terminate()
        _ = try? await runBlocking { [process] in process.waitUntilExit() }
    }

    /// Whether it has not exited yet.
    var isRunning: Bool { process.isRunning }

    /// Sends it SIGTERM and returns (another may follow; `stop` waits).
    func signalStop() { process.terminate() }

    /// Waits up to `limit` for it to exit; its exit status, or nil if it is still running.
    func exitStatus(within limit: Duration) async throws -> Int32? {
        let deadline = ContinuousClock.now + limit
        while process.isRunning {
            guard ContinuousClock.now < deadline else { return nil }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await runBlocking { [process] in process.waitUntilExit() }
    }

    struct Failure: Error, CustomStringConvertible {
        let what: String
        var description: String { what }
    }
}
