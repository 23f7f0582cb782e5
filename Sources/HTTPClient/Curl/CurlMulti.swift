internal import CCurl
internal import CLinux
import HTTPCore

/// A libcurl multi handle driven by an `EventLoop` through libcurl's multi-socket interface:
/// libcurl names the descriptors to watch and the timeout it wants, the loop's epoll set
/// watches them, and readiness comes back through `curl_multi_socket_action`. Each wake-up
/// touches only the sockets that are ready (`curl_multi_poll` and `curl_multi_perform`
/// went over every transfer each time).
///
/// `HTTPClient` keeps one on its own thread and one on each server I/O thread it is called
/// from, so that a request handler's upstream request never leaves the handler's thread.
///
/// Everything here runs on `loop`'s thread, except `submit`, `cancel` and `resume`, which
/// post to it when called from elsewhere. Hence `@unchecked Sendable`.
///
/// libcurl must not be re-entered from its own callbacks, so nothing a callback triggers runs
/// inline: continuations resume onto executors, and unpausing goes through `loop.execute`.
final class CurlMulti: EventLoopHandler, @unchecked Sendable {
    /// `curl_global_init`, once per process, before the first handle.
    private static let globalInit: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// The client's loop (strong: a body stream may outlive the client and still ask to resume).
    let loop: EventLoop
    let pool: CurlEasyPool
    private let multi: UnsafeMutableRawPointer
    private let connectTimeout: UInt64
    /// The transfers in the multi handle, by easy handle.
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// Streaming transfers whose head is complete, handed over after the current action.
    private var headsReady: [CurlTransfer] = []
    /// libcurl's timeout (CURLMOPT_TIMERFUNCTION).
    private var curlTimer: EventLoopTimer!
    /// The read-timeout sweep, armed while transfers are active.
    private var sweepTimer: EventLoopTimer!
    /// libcurl asked to be called back at once; a kick is queued on the loop.
    private var kickQueued = false
    private var closed = false

    /// A handle on `loop`. Call on the loop's thread, or before the loop starts.
    init(loop: EventLoop, configuration: HTTPClient.Configuration) {
        precondition(CurlMulti.globalInit, "curl_global_init failed")
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed") }
        self.multi = multi
        self.loop = loop
        let perHost = max(1, configuration.maxConnectionsPerHost)
        bff_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, perHost)
        bff_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(64, perHost * 4))
        pool = CurlEasyPool(capacity: max(64, perHost * 4))
        connectTimeout = configuration.connectTimeout.nanoseconds
        let me = Unmanaged.passUnretained(self).toOpaque() // valid until curl_multi_cleanup in close()
        bff_curl_multi_setopt_socketfunction(multi, curlSocketCallback)
        bff_curl_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, me)
        bff_curl_multi_setopt_timerfunction(multi, curlTimerCallback)
        bff_curl_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, me)
        curlTimer = loop.makeTimer { [unowned self] in socketAction(bff_curl_socket_timeout, 0) }
        sweepTimer = loop.makeTimer { [unowned self] in sweep() }
    }

    /// Builds a transfer for `request` on a pooled easy handle (on the caller's thread).
    func makeTransfer(_ request: HTTPClientRequest, configuration: HTTPClient.Configuration,
                      streaming: Bool) throws(HTTPClientError) -> CurlTransfer {
        try request.validate()
        guard let easy = pool.acquire() else { throw .other("curl_easy_init failed") }
        let transfer = CurlTransfer(easy: easy, request: request, configuration: configuration, streaming: streaming)
        if streaming { transfer.makeBodyBuffer(multi: self) }
        return transfer
    }

    /// Starts `transfer` (its `delivery` must be set). From any thread.
    func submit(_ transfer: CurlTransfer) {
        loop.execute { [self] in add(transfer) }
    }

    /// Stops `transfer` with `HTTPClientError.cancelled`, whether or not it has started.
    /// From any thread.
    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelRequested.store(true, ordering: .releasing)
        loop.execute { [self] in
            if active[transfer.easy.handle] === transfer { end(transfer, .cancelled()) }
        }
    }

    /// Continues a transfer paused because its consumer was behind. From any thread; runs
    /// later on the loop (never inside a libcurl callback).
    func resume(_ transfer: CurlTransfer) {
        loop.execute { [self] in
            guard active[transfer.easy.handle] === transfer, transfer.paused else { return }
            transfer.paused = false // before the call: libcurl may deliver (and pause again) inside it
            transfer.touch()
            curl_easy_pause(transfer.easy.handle, bff_curlpause_cont)
            afterAction()
        }
    }

    // MARK: - Loop thread

    /// `EventLoopHandler`: one of libcurl's sockets is ready.
    func handle(fd: Int32, events: UInt32) {
        var mask: Int32 = 0
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 { mask |= CURL_CSELECT_IN }
        if events & EPOLLOUT.rawValue != 0 { mask |= CURL_CSELECT_OUT }
        if events & EPOLLERR.rawValue != 0 { mask |= CURL_CSELECT_ERR }
        socketAction(fd, mask)
    }

    /// The client goes: transfers still running fail as cancelled, and the multi handle with
    /// its cached connections goes.
    func close() {
        guard !closed else { return }
        for transfer in Array(active.values) { end(transfer, .cancelled("the HTTP client has shut down")) }
        closed = true
        curl_multi_cleanup(multi) // may report sockets removed: unwatched in the callback
        loop.removeTimer(curlTimer)
        loop.removeTimer(sweepTimer)
    }

    private func add(_ transfer: CurlTransfer) {
        if closed || transfer.cancelRequested.load(ordering: .acquiring) {
            transfer.finish(.failure(closed ? .cancelled("the HTTP client has shut down") : .cancelled()))
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
        if sweepTimer.deadline == nil { sweepTimer.deadline = loop.now + 0.01 }
    }

    private func socketAction(_ fd: Int32, _ mask: Int32) {
        guard !closed else { return }
        var running: Int32 = 0
        curl_multi_socket_action(multi, fd, mask, &running)
        afterAction()
    }

    /// After libcurl ran: finished transfers end, completed heads go to their callers.
    private func afterAction() {
        drainFinished()
        guard !headsReady.isEmpty else { return }
        for transfer in headsReady { transfer.deliverHeadIfReady() }
        headsReady.removeAll(keepingCapacity: true)
    }

    /// CURLMOPT_SOCKETFUNCTION: watch `fd` for `what` (CURL_POLL_*), or stop watching it.
    fileprivate func watch(_ fd: Int32, _ what: Int32) {
        switch what {
        case CURL_POLL_IN: loop.watch(fd, events: EPOLLIN.rawValue, handler: self)
        case CURL_POLL_OUT: loop.watch(fd, events: EPOLLOUT.rawValue, handler: self)
        case CURL_POLL_INOUT: loop.watch(fd, events: EPOLLIN.rawValue | EPOLLOUT.rawValue, handler: self)
        default: loop.unwatch(fd) // CURL_POLL_REMOVE, before libcurl closes it
        }
    }

    /// CURLMOPT_TIMERFUNCTION: call back in `milliseconds` (-1: no timeout). A zero timeout
    /// runs from the loop's own work queue, without waiting on epoll first.
    fileprivate func setTimeout(_ milliseconds: Int) {
        if milliseconds < 0 {
            curlTimer.deadline = nil
        } else if milliseconds == 0 {
            curlTimer.deadline = nil
            guard !kickQueued else { return }
            kickQueued = true
            loop.execute { [self] in
                kickQueued = false
                socketAction(bff_curl_socket_timeout, 0)
            }
        } else {
            curlTimer.deadline = loop.now + Double(milliseconds) / 1000
        }
    }

    /// A streaming transfer's head is complete (from a callback inside libcurl).
    func headReady(_ transfer: CurlTransfer) { headsReady.append(transfer) }

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
    private func sweep() {
        let now = monotonicNanoseconds()
        for transfer in active.values where !transfer.paused && now > transfer.deadline {
            end(transfer, .timedOut("no data from the upstream within the read timeout"))
        }
        if !active.isEmpty { sweepTimer.deadline = loop.now + 0.01 }
    }

    /// Stops a transfer before libcurl finished it. Its connection is closed, never cached:
    /// the rest of the response would still be on it.
    private func end(_ transfer: CurlTransfer, _ error: HTTPClientError) {
        let handle = transfer.easy.handle
        bff_curl_setopt_long(handle, CURLOPT_FORBID_REUSE, 1)
        curl_multi_remove_handle(multi, handle)
        active[handle] = nil
        transfer.finish(.failure(error))
        pool.release(transfer.easy)
    }
}

/// CURLMOPT_SOCKETFUNCTION; `userp` is the unretained `CurlMulti`.
private func curlSocketCallback(_ easy: UnsafeMutableRawPointer?, _ fd: curl_socket_t, _ what: Int32,
                                _ userp: UnsafeMutableRawPointer?, _ socketp: UnsafeMutableRawPointer?) -> Int32 {
    guard let userp else { return -1 }
    Unmanaged<CurlMulti>.fromOpaque(userp).takeUnretainedValue().watch(fd, what)
    return 0
}

/// CURLMOPT_TIMERFUNCTION; `userp` is the unretained `CurlMulti`.
private func curlTimerCallback(_ multi: UnsafeMutableRawPointer?, _ milliseconds: Int, _ userp: UnsafeMutableRawPointer?) -> Int32 {
    guard let userp else { return -1 }
    Unmanaged<CurlMulti>.fromOpaque(userp).takeUnretainedValue().setTimeout(milliseconds)
    return 0
}
