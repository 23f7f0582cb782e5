internal import CCurl
import Foundation
import Synchronization

/// One thread driving a libcurl multi handle: every outbound request of an `HTTPClient`
/// runs here, so blocking never reaches the Swift concurrency pool, and the multi handle's
/// connection cache keeps upstream connections alive between requests.
final class CurlEngine: @unchecked Sendable {
    // @unchecked: `multi` and `active` are used only on the engine thread; `commands` is
    // guarded by its mutex; curl_multi_wakeup is safe from any thread.
    enum Command {
        case add(CurlTransfer)
        case resume(CurlTransfer)
        case cancel(CurlTransfer)
        case stop
    }

    private let multi: UnsafeMutableRawPointer
    private let commands = Mutex<[Command]>([])
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    static let globalInit: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    init(maxConnectionsPerHost: Int) {
        precondition(CurlEngine.globalInit, "curl_global_init failed")
        multi = curl_multi_init()!
        bff_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maxConnectionsPerHost)
        bff_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, maxConnectionsPerHost * 4)
        let thread = Thread { [self] in run() }
        thread.name = "http-client"
        thread.start()
    }

    func send(_ command: Command) {
        commands.withLock { $0.append(command) }
        curl_multi_wakeup(multi)
    }

    private func run() {
        var running: Int32 = 0
        var stopping = false
        while !stopping || !active.isEmpty {
            for command in commands.withLock({ c in defer { c.removeAll() }; return c }) {
                switch command {
                case let .add(transfer):
                    active[transfer.easy] = transfer
                    curl_multi_add_handle(multi, transfer.easy)
                case let .resume(transfer):
                    if active[transfer.easy] != nil { curl_easy_pause(transfer.easy, bff_curlpause_cont) }
                case let .cancel(transfer):
                    if active[transfer.easy] != nil { end(transfer, error: HTTPClientError(.cancelled, "cancelled")) }
                case .stop:
                    stopping = true
                    for transfer in active.values { end(transfer, error: HTTPClientError(.cancelled, "client shut down")) }
                }
            }
            curl_multi_perform(multi, &running)
            drainFinished()
            enforceHeadDeadlines()
            curl_multi_poll(multi, nil, 0, 100, nil)
        }
        curl_multi_cleanup(multi)
    }

    private func drainFinished() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            var easy: UnsafeMutableRawPointer?
            var result = CURLE_OK
            guard bff_curl_msg_done(message, &easy, &result) == 1, let easy, let transfer = active[easy] else { continue }
            curl_multi_remove_handle(multi, easy)
            active[easy] = nil
            transfer.complete(result)
        }
    }

    /// A response head that does not arrive in time fails the transfer (libcurl's own
    /// low-speed limit works in whole seconds only).
    private func enforceHeadDeadlines() {
        let now = ProcessInfo.processInfo.systemUptime
        for transfer in active.values where transfer.status == 0 && now > transfer.headDeadline {
            end(transfer, error: HTTPClientError(.timedOut, "no response in time"))
        }
    }

    private func end(_ transfer: CurlTransfer, error: HTTPClientError) {
        curl_multi_remove_handle(multi, transfer.easy)
        active[transfer.easy] = nil
        if !transfer.finished {
            transfer.finished = true
            transfer.finish(error)
        }
    }
}
