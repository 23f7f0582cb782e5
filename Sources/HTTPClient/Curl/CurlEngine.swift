internal import CCurl
import Foundation
import Synchronization

/// One thread driving a libcurl multi handle. Every request of an `HTTPClient` runs here,
/// so no blocking call reaches the Swift concurrency pool, and the multi handle's connection
/// cache keeps upstream connections alive between requests.
///
/// Other threads talk to it only through `send`: commands go into a mutex-guarded inbox and
/// `curl_multi_wakeup` interrupts `curl_multi_poll`. Hence `@unchecked Sendable`: `multi` and
/// `active` are used on the engine thread only (and `multi` by `curl_multi_wakeup`, which is
/// thread-safe). The wake-up happens outside the lock (inside it, the engine thread blocked
/// on a lock held across a syscall); it cannot race `curl_multi_cleanup`, which runs only
/// in `deinit`, once no sender holds the engine.
final class CurlEngine: @unchecked Sendable {
    enum Command {
        case add(CurlTransfer)
        case resume(CurlTransfer)
        case cancel(CurlTransfer)
        case stop
    }

    private struct Inbox {
        var commands: [Command] = []
        /// A wakeup was sent and the engine has not taken the commands yet.
        var wakeupPending = false
        /// The engine has stopped; the multi handle is gone.
        var closed = false
    }

    /// `curl_global_init`, once per process, before the first handle.
    private static let globalInit: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    private let multi: UnsafeMutableRawPointer
    private let inbox = Mutex(Inbox())
    let pool: CurlEasyPool
    private let connectTimeout: UInt64
    /// Engine thread only: the transfers in the multi handle, by easy handle.
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    init(configuration: HTTPClient.Configuration) {
        precondition(CurlEngine.globalInit, "curl_global_init failed")
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed") }
        self.multi = multi
        let perHost = max(1, configuration.maxConnectionsPerHost)
        bff_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, perHost)
        bff_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(64, perHost * 4))
        pool = CurlEasyPool(capacity: max(64, perHost * 4))
        connectTimeout = configuration.connectTimeout.nanoseconds
        let thread = Thread { [self] in run() } // the thread keeps the engine alive until it stops
        thread.name = "http-client"
        thread.start()
    }

    /// Builds a transfer for `request` on a pooled easy handle (on the caller's thread).
    func makeTransfer(_ request: HTTPClientRequest, configuration: HTTPClient.Configuration,
                      streaming: Bool) throws(HTTPClientError) -> CurlTransfer {
        try request.validate()
        guard let easy = pool.acquire() else { throw .other("curl_easy_init failed") }
        let transfer = CurlTransfer(easy: easy, request: request, configuration: configuration, streaming: streaming)
        if streaming { transfer.makeBodyBuffer(engine: self) }
        return transfer
    }

    /// Starts `transfer` (its `delivery` must be set).
    func submit(_ transfer: CurlTransfer) { send(.add(transfer)) }

    /// Stops `transfer` with `HTTPClientError.cancelled`, whether or not it has started.
    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelRequested.store(true, ordering: .releasing)
        send(.cancel(transfer))
    }

    func send(_ command: Command) {
        let (refused, wake): (CurlTransfer?, Bool) = inbox.withLock { inbox in
            if inbox.closed {
                if case let .add(transfer) = command { return (transfer, false) }
                return (nil, false)
            }
            inbox.commands.append(command)
            if inbox.wakeupPending { return (nil, false) }
            inbox.wakeupPending = true
            return (nil, true)
        }
        if wake { curl_multi_wakeup(multi) }
        refused?.finish(.failure(.cancelled("the HTTP client has shut down")))
    }

    // MARK: - Engine thread

    private func run() {
        var commands: [Command] = []
        var stopping = false
        var running: Int32 = 0
        var nextSweep: UInt64 = 0
        while !(stopping && active.isEmpty) {
            inbox.withLock { inbox in
                inbox.wakeupPending = false
                swap(&commands, &inbox.commands)
            }
            for command in commands {
                switch command {
                case let .add(transfer): add(transfer, refuse: stopping)
                case let .resume(transfer): resume(transfer)
                case let .cancel(transfer):
                    if active[transfer.easy.handle] === transfer { end(transfer, .cancelled()) }
                case .stop:
                    stopping = true
                    for transfer in Array(active.values) { end(transfer, .cancelled("the HTTP client has shut down")) }
                }
            }
            commands.removeAll(keepingCapacity: true)
            curl_multi_perform(multi, &running)
            drainFinished()
            for transfer in active.values where transfer.headReady { transfer.deliverHeadIfReady() }
            let now = monotonicNanoseconds()
            if now >= nextSweep {
                nextSweep = now + 10_000_000
                enforceTimeouts(now)
            }
            curl_multi_poll(multi, nil, 0, active.isEmpty ? 1000 : 20, nil)
        }
        let late = inbox.withLock { inbox in
            inbox.closed = true
            defer { inbox.commands = [] }
            return inbox.commands
        }
        for case let .add(transfer) in late { transfer.finish(.failure(.cancelled("the HTTP client has shut down"))) }
    }

    deinit { curl_multi_cleanup(multi) }

    private func add(_ transfer: CurlTransfer, refuse: Bool) {
        if refuse || transfer.cancelRequested.load(ordering: .acquiring) {
            transfer.finish(.failure(refuse ? .cancelled("the HTTP client has shut down") : .cancelled()))
            pool.release(transfer.easy)
            return
        }
        transfer.startClock(connectTimeout: connectTimeout)
        let code = curl_multi_add_handle(multi, transfer.easy.handle)
        guard code == CURLM_OK else {
            transfer.finish(.failure(.other(String(cString: curl_multi_strerror(code)))))
            pool.release(transfer.easy)
            return
        }
        active[transfer.easy.handle] = transfer
    }

    private func resume(_ transfer: CurlTransfer) {
        guard active[transfer.easy.handle] === transfer, transfer.paused else { return }
        transfer.paused = false // before the call: libcurl may deliver (and pause again) inside it
        transfer.touch()
        curl_easy_pause(transfer.easy.handle, bff_curlpause_cont)
    }

    private func drainFinished() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            var easy: UnsafeMutableRawPointer?
            var result = CURLE_OK
            guard bff_curl_msg_done(message, &easy, &result) == 1, let easy, let transfer = active.removeValue(forKey: easy) else { continue }
            curl_multi_remove_handle(multi, easy)
            transfer.complete(result)
            pool.release(transfer.easy)
        }
    }

    /// The read timeout: a transfer that is not paused by its consumer and has received
    /// nothing for that long fails. (libcurl's low-speed limit counts in whole seconds and
    /// does not know that a paused transfer is waiting for us, not for the upstream.)
    private func enforceTimeouts(_ now: UInt64) {
        for transfer in active.values where !transfer.paused && now > transfer.deadline {
            end(transfer, .timedOut("no data from the upstream within the read timeout"))
        }
    }

    /// Stops a transfer before libcurl finished it. Its connection is closed, never cached:
    /// the rest of the response would still be on it.
    private func end(_ transfer: CurlTransfer, _ error: HTTPClientError) {
        bff_curl_setopt_long(transfer.easy.handle, CURLOPT_FORBID_REUSE, 1)
        curl_multi_remove_handle(multi, transfer.easy.handle)
        active[transfer.easy.handle] = nil
        transfer.finish(.failure(error))
        pool.release(transfer.easy)
    }
}
