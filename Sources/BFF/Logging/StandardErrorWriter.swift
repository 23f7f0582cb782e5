#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// Writes log lines to standard error on a thread of its own, so that no I/O thread ever
/// waits on, or dies with, whatever reads the log. A reader that stalls (a full pipe, a log
/// shipper behind) holds only this thread; lines queued past `capacity` bytes are dropped,
/// and a line says how many once the reader takes lines again. A reader that has gone (a
/// closed pipe: EPIPE) loses the lines; the process goes on.
final class StandardErrorWriter: Sendable {
    private struct State {
        var queued: [UInt8] = []
        var dropped = 0
        var writing = false
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let capacity: Int
    private let fd: Int32

    /// The process's writer to standard error (file descriptor 2). Lines still queued when
    /// the process exits are written first, for up to 2 s.
    static let shared: StandardErrorWriter = {
        let writer = StandardErrorWriter(fd: 2, capacity: 4 << 20)
        atexit { StandardErrorWriter.shared.flush(within: .seconds(2)) }
        return writer
    }()

    init(fd: Int32, capacity: Int) {
        self.fd = fd
        self.capacity = capacity
        signal(SIGPIPE, SIG_IGN) // a closed pipe is an error to see (EPIPE), not the end of the process
        let thread = Thread { [self] in run() }
        thread.name = "log-writer"
        thread.start()
    }

    /// Queues `line`; never blocks. Dropped (and counted) when `capacity` bytes wait already.
    func write(_ line: String) {
        let wasIdle = state.withLock { state -> Bool in
            guard state.queued.count + line.utf8.count <= capacity else {
                state.dropped += 1
                return false
            }
            let idle = state.queued.isEmpty && !state.writing
            state.queued.append(contentsOf: line.utf8)
            return idle
        }
        if wasIdle { wake.signal() }
    }

    /// Waits until every queued line is written, or `limit` has passed.
    func flush(within limit: Duration) {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline, state.withLock({ !$0.queued.isEmpty || $0.writing }) {
            usleep(2_000)
        }
    }

    private func run() {
        while true {
            wake.wait()
            while let batch = take() {
                writeAll(batch)
                state.withLock { $0.writing = false }
            }
        }
    }

    /// The lines queued so far (with a line for those dropped), or nil when none wait.
    private func take() -> [UInt8]? {
        state.withLock { state -> [UInt8]? in
            guard !state.queued.isEmpty || state.dropped > 0 else { return nil }
            var batch: [UInt8] = []
            swap(&batch, &state.queued)
            if state.dropped > 0 {
                batch += Array(StandardErrorWriter.droppedLine(state.dropped).utf8)
                state.dropped = 0
            }
            state.writing = true
            return batch
        }
    }

    /// A JSON log line of its own: `count` lines were dropped while the reader was behind.
    static func droppedLine(_ count: Int) -> String {
        "{\"ts\":\"\(JSONLogHandler.timestamp())\",\"level\":\"warning\",\"label\":\"smart-bff\","
            + "\"msg\":\"log lines dropped: standard error's reader was behind\",\"log.dropped_lines\":\"\(count)\"}\n"
    }

    /// Writes `bytes` whole; gives up on an error other than an interruption or a full
    /// non-blocking descriptor (the reader has gone: those lines are lost).
    private func writeAll(_ bytes: [UInt8]) {
        var offset = 0
        bytes.withUnsafeBytes { raw in
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                    var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&ready, 1, 1_000)
                } else {
                    return
                }
            }
        }
    }
}
