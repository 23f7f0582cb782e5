#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Foundation
import Synchronization

/// One I/O thread: an epoll set of non-blocking sockets, a queue of work posted from other
/// threads (woken through an eventfd), and a coarse timer. Every `Connection` belongs to
/// exactly one loop and is touched only on that loop's thread; other threads reach it only
/// through `execute`. This keeps connection state free of locks, and one epoll set per core
/// serves thousands of idle connections without a thread or a Dispatch source each.
///
/// The loop is also a `TaskExecutor`: request handlers run as tasks that prefer it, so a
/// handler starts, resumes after its awaits, and hands its response over on the thread that
/// owns the connection, without a hop through the global pool each way. Handlers must
/// therefore not block; an `await` that leaves (an actor, a continuation) comes back here.
///
/// Other modules of the package put their own descriptors and timers on a loop (`watch`,
/// `makeTimer`): the HTTP client runs its connections on the server's loops, and on a loop without a server
/// (`EventLoop(application: nil)`).
package final class EventLoop: TaskExecutor, @unchecked Sendable {
    // @unchecked: `connections`, `handlers`, `timers`, `listener`, `local` and the timing
    // fields are touched only on the loop thread; `pending` is guarded by its mutex; the
    // descriptors are immutable.
    let epollFD: Int32
    private let wakeFD: Int32
    private let pending = Mutex<[LoopWork]>([])
    /// Work posted from the loop thread itself: run before the loop waits again.
    private var local: [LoopWork] = []
    /// The other half of each queue's double buffer: a queue's items run from here while new
    /// ones go to the emptied queue, so that neither array is reallocated per loop turn.
    private var runningLocal: [LoopWork] = []
    private var runningPending: [LoopWork] = []
    /// The loop thread's pthread id, once it runs (0 before).
    private let threadID = Atomic<UInt>(0)
    private var connections: [Connection?] = []
    /// Descriptors other than connections, by descriptor.
    private var handlers: [Int32: any EventLoopHandler] = [:]
    private var timers: [EventLoopTimer] = []
    /// Run on the loop thread once the loop has stopped (see `whenStopped`).
    private var stopActions: [() -> Void] = []
    private(set) var connectionCount = 0
    private var running = true
    private var listenerFD: Int32 = -1
    /// While accepting is paused (`pauseAccepting`): the timer that resumes it.
    private var acceptResumption: EventLoopTimer?
    private let stopped = DispatchSemaphore(value: 0)
    /// The server whose connections this loop serves; nil on a loop of its own (a client's).
    unowned(unsafe) var server: HTTPServer?
    /// What this loop's connections answer with (this loop's own instance); nil without a server.
    let application: HTTPApplication?
    /// How many loops share the work this one does (a server's I/O threads; 1 for a loop of
    /// its own), for what is limited per process and kept per loop, such as connections.
    package let groupSize: Int
    /// The `Date` header value, refreshed once a second.
    private(set) var dateHeader: [UInt8] = []
    private var dateSecond = 0
    /// Seconds on a monotonic clock, updated every loop turn.
    package private(set) var now: Double = 0
    let scratch: UnsafeMutableRawBufferPointer

    package init(application: HTTPApplication?, groupSize: Int = 1) throws(SocketError) {
        self.application = application
        self.groupSize = max(1, groupSize)
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw .makeFailed("epoll_create1") }
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard wakeFD >= 0 else { throw .makeFailed("eventfd") }
        scratch = .allocate(byteCount: 64 * 1024, alignment: 16)
        register(wakeFD, events: EPOLLIN.rawValue)
        updateClock()
    }

    deinit {
        scratch.deallocate()
        close(wakeFD)
        close(epollFD)
    }

    package func start(name: String) {
        // The thread holds the loop until `run` returns; the loop does not hold the thread
        // (that cycle kept every stopped loop, its epoll set and buffers, forever).
        let thread = Thread { [self] in
            bff_set_thread_name(name) // Thread.name does not reach the OS on Linux
            run()
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Whether the caller runs on this loop's thread.
    package var inLoop: Bool { threadID.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// The loop whose thread the caller runs on, if any (a request handler's, for instance).
    package static var current: EventLoop? {
        guard let loop = pthread_getspecific(currentKey) else { return nil }
        return Unmanaged<EventLoop>.fromOpaque(loop).takeUnretainedValue()
    }

    /// The thread-specific slot behind `current`, made once per process.
    private static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    /// Runs `work` on the loop thread soon (never inline). Safe from any thread.
    package func execute(_ work: @escaping @Sendable () -> Void) {
        post(.closure(work))
    }

    /// `TaskExecutor`: runs the job on the loop thread. (Queued as it is: wrapping each job
    /// in a closure cost an allocation per resumed task.)
    package func enqueue(_ job: consuming ExecutorJob) {
        post(.job(UnownedJob(job)))
    }

    private func post(_ work: LoopWork) {
        if inLoop {
            local.append(work)
            return
        }
        let wasEmpty = pending.withLock { queue in
            queue.append(work)
            return queue.count == 1
        }
        if wasEmpty {
            var one: UInt64 = 1
            _ = Glibc.write(wakeFD, &one, 8)
        }
    }

    /// Loop thread: runs one queued item.
    private func run(_ work: LoopWork) {
        switch work {
        case let .closure(body): body()
        case let .job(job): job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }

    /// Waits until the loop thread has exited.
    func waitUntilStopped() { stopped.wait() }

    // MARK: Loop-thread API

    func register(_ fd: Int32, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event)
    }

    func modify(_ fd: Int32, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event)
    }

    func startAccepting(_ fd: Int32) {
        listenerFD = fd
        register(fd, events: EPOLLIN.rawValue | EPOLLEXCLUSIVE.rawValue)
    }

    func stopAccepting() {
        guard listenerFD >= 0 else { return }
        epoll_ctl(epollFD, EPOLL_CTL_DEL, listenerFD, nil) // fails harmlessly while paused
        listenerFD = -1
    }

    /// Loop thread: stops watching the listener for `seconds` (no descriptor is left for a
    /// new connection), then watches it again unless accepting has stopped meanwhile.
    func pauseAccepting(for seconds: Double) {
        guard listenerFD >= 0, acceptResumption == nil else { return }
        epoll_ctl(epollFD, EPOLL_CTL_DEL, listenerFD, nil)
        let timer = makeTimer { [unowned self] in
            if let timer = acceptResumption { removeTimer(timer) }
            acceptResumption = nil
            guard listenerFD >= 0 else { return }
            register(listenerFD, events: EPOLLIN.rawValue | EPOLLEXCLUSIVE.rawValue)
        }
        timer.deadline = now + seconds
        acceptResumption = timer
    }

    func add(_ connection: Connection) {
        let fd = Int(connection.fd)
        if fd >= connections.count { connections.append(contentsOf: repeatElement(nil, count: fd - connections.count + 64)) }
        connections[fd] = connection
        connectionCount += 1
        register(connection.fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
    }

    /// Forgets a connection and closes its descriptor.
    func remove(_ connection: Connection) {
        let fd = Int(connection.fd)
        guard fd < connections.count, connections[fd] === connection else { return }
        connections[fd] = nil
        connectionCount -= 1
        epoll_ctl(epollFD, EPOLL_CTL_DEL, connection.fd, nil)
        close(connection.fd)
        server?.connectionClosed()
    }

    /// Loop thread: the loop ends after this turn.
    package func stop() { running = false }

    /// Loop thread: delivers `events` (EPOLLIN, EPOLLOUT, ...) on `fd` to `handler`, replacing
    /// what was watched on `fd` before. Level-triggered.
    package func watch(_ fd: Int32, events: UInt32, handler: any EventLoopHandler) {
        let watched = handlers.updateValue(handler, forKey: fd) != nil
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        // Modify what is watched, add what is new (one system call either way). A descriptor
        // closed without `unwatch` left the epoll set by itself and its number may come back,
        // so either may find the set otherwise: then the other one does.
        if watched {
            if epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event) != 0 && errno == ENOENT {
                epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event)
            }
        } else if epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) != 0 && errno == EEXIST {
            epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event)
        }
    }

    /// Loop thread: stops watching `fd` (before it is closed).
    package func unwatch(_ fd: Int32) {
        guard handlers.removeValue(forKey: fd) != nil else { return }
        epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
    }

    /// Loop thread: a timer that runs `action` on the loop once its `deadline` (a time on
    /// the loop's `now` clock) has passed; disarmed until a deadline is set.
    package func makeTimer(_ action: @escaping () -> Void) -> EventLoopTimer {
        let timer = EventLoopTimer(action: action)
        timers.append(timer)
        return timer
    }

    /// Loop thread: runs `action` on this thread once the loop has stopped, after its
    /// connections closed (for what other modules keep on the loop, such as a client's
    /// cached connections).
    package func whenStopped(_ action: @escaping () -> Void) {
        stopActions.append(action)
    }

    /// Loop thread: forgets `timer`.
    package func removeTimer(_ timer: EventLoopTimer) {
        timers.removeAll { $0 === timer }
    }

    /// Every live connection, for timeouts and shutdown.
    func forEachConnection(_ body: (Connection) -> Void) {
        for case let connection? in connections { body(connection) }
    }

    private func run() {
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        var nextTick = now + 0.25
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        // Unretained: the thread's closure holds the loop until `run` returns.
        pthread_setspecific(Self.currentKey, Unmanaged.passUnretained(self).toOpaque())
        defer { pthread_setspecific(Self.currentKey, nil) }
        while running {
            runLocalWork()
            let wake = min(nextTick, nextTimerDeadline())
            let timeout = local.isEmpty ? Int32(max(0, min(250, ((wake - now) * 1000).rounded(.up)))) : 0
            let n = epoll_wait(epollFD, events, Int32(capacity), timeout)
            updateClock()
            if n > 0 {
                for k in 0..<Int(n) { handle(events[k]) }
            }
            runDueTimers()
            if now >= nextTick {
                server?.tick(self)
                nextTick = now + 0.25
            }
        }
        runLocalWork()
        forEachConnection { remove($0) }
        let actions = stopActions
        stopActions = []
        for action in actions { action() }
        unwind()
        stopped.signal()
    }

    /// Loop thread, once stopped: runs the work that the closed connections and the stop
    /// actions set off, so that the tasks they resumed with errors run to their end (a
    /// proxied read records its audit entry; a handler lets go of what it holds). Returns
    /// once no work has come for `quietPeriod`, or after `limit` at most; work posted later
    /// is never run.
    private func unwind(quietPeriod: Double = 0.02, limit: Double = 2) {
        let deadline = now + limit
        var lastWork = now
        var event = epoll_event()
        while now < deadline && now - lastWork < quietPeriod {
            var ran = false
            while !local.isEmpty {
                runLocalWork()
                ran = true
            }
            let waiting = pending.withLock { !$0.isEmpty }
            if waiting {
                handle(epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: wakeFD)))
                ran = true
            } else if !ran {
                // Sleeps until work is posted (the wake descriptor) or the quiet period ends.
                _ = epoll_wait(epollFD, &event, 1, Int32((quietPeriod * 1000).rounded(.up)))
            }
            updateClock()
            if ran { lastWork = now }
        }
    }

    private func nextTimerDeadline() -> Double {
        var earliest = Double.infinity
        for timer in timers { if let deadline = timer.deadline, deadline < earliest { earliest = deadline } }
        return earliest
    }

    private func runDueTimers() {
        for timer in timers {
            guard let deadline = timer.deadline, deadline <= now else { continue }
            timer.deadline = nil
            timer.action()
        }
    }

    /// Runs what the loop posted to itself, including what that work posts in turn, up to a
    /// bound so that I/O is not starved.
    private func runLocalWork() {
        var rounds = 0
        while !local.isEmpty && rounds < 16 {
            swap(&local, &runningLocal)
            for item in runningLocal { run(item) }
            runningLocal.removeAll(keepingCapacity: true)
            rounds += 1
        }
    }

    private func handle(_ event: epoll_event) {
        let fd = event.data.fd
        if fd == wakeFD {
            var value: UInt64 = 0
            _ = Glibc.read(wakeFD, &value, 8)
            pending.withLock { queue in swap(&queue, &runningPending) }
            for item in runningPending { run(item) }
            runningPending.removeAll(keepingCapacity: true)
        } else if fd == listenerFD {
            server?.acceptConnections(on: self, listener: fd)
        } else if Int(fd) < connections.count, let connection = connections[Int(fd)] {
            connection.handle(events: event.events)
        } else if let handler = handlers[fd] {
            handler.handle(fd: fd, events: event.events)
        }
    }

    private func updateClock() {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        now = Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        let wall = time(nil)
        if Int(wall) != dateSecond {
            dateSecond = Int(wall)
            dateHeader = Array(HTTPDate.format(wall).utf8)
        }
    }
}

/// What watches a descriptor on an `EventLoop` besides its connections.
package protocol EventLoopHandler: AnyObject {
    /// Loop thread: `events` (epoll flags) happened on `fd`.
    func handle(fd: Int32, events: UInt32)
}

/// A one-shot timer on an `EventLoop` (see `makeTimer`); loop thread only.
package final class EventLoopTimer {
    /// When the action runs, on the loop's `now` clock; nil while disarmed. Cleared just
    /// before the action runs.
    package var deadline: Double?
    fileprivate let action: () -> Void

    fileprivate init(action: @escaping () -> Void) { self.action = action }
}

/// An item of an event loop's work queues: a closure, or a task's job (kept as it is, so that
/// resuming a task on the loop allocates nothing).
private enum LoopWork: @unchecked Sendable {
    // @unchecked: an `UnownedJob` is handed from the thread that enqueues it to the loop
    // thread, which alone runs it, once.
    case closure(@Sendable () -> Void)
    case job(UnownedJob)
}
