@testable import BFF
import SMART
import Testing

/// The gate that bounds how many refreshes hold a database connection while their EHR
/// answers, and how many of them one EHR may hold.
@Suite("refresh gate")
struct RefreshGateTests {
    @Test("an EHR whose refreshes hang holds half the slots: another EHR's refresh gets one at once, ahead of the first EHR's next")
    func perIssuerShare() async throws {
        let gate = RefreshGate(slots: 4)
        #expect(gate.perIssuer == 2)
        // Far beyond what the test takes, on a loaded machine too: a refresh whose deadline
        // passed takes no slot, and the waits below would never end.
        let deadline = RefreshDeadline(.seconds(300))
        let entries = Entries(), release = Release()
        let hung = (0..<3).map { _ in
            Task { try await gate.withSlot(for: "https://x.example/fhir", before: deadline) { await entries.add("x"); await release.wait() } }
        }
        let giveUp = ContinuousClock.now + .seconds(120)
        while await entries.all.count < 2 || gate.waiting < 1, ContinuousClock.now < giveUp { try await Task.sleep(for: .milliseconds(10)) }
        try #require(await entries.all.count == 2 && gate.waiting == 1, "x's refreshes did not take two slots and wait for a third")
        // Two slots are free, but the third of x's refreshes waits: its EHR has its share.
        try await gate.withSlot(for: "https://y.example/fhir", before: deadline) { await entries.add("y") }
        #expect(await entries.all == ["x", "x", "y"])
        await release.open()
        for task in hung { try await task.value }
        #expect(await entries.all == ["x", "x", "y", "x"])
    }

    @Test("a refresh whose deadline has passed takes no slot, free as they are")
    func noSlotAfterTheDeadline() async throws {
        let gate = RefreshGate(slots: 4)
        await #expect(throws: SMARTError.self) {
            try await gate.withSlot(for: "x", before: RefreshDeadline(.zero)) { Issue.record("a slot after the deadline") }
        }
        try await gate.withSlot(for: "x", before: RefreshDeadline(.seconds(30))) {}
    }

    @Test("one slot: every issuer takes its turn in order")
    func oneSlot() async throws {
        let gate = RefreshGate(slots: 1)
        #expect(gate.perIssuer == 1)
        let deadline = RefreshDeadline(.seconds(300)) // as above
        let entries = Entries(), release = Release()
        let first = Task { try await gate.withSlot(for: "x", before: deadline) { await entries.add("x"); await release.wait() } }
        let giveUp = ContinuousClock.now + .seconds(120)
        while await entries.all.isEmpty, ContinuousClock.now < giveUp { try await Task.sleep(for: .milliseconds(10)) }
        try #require(await entries.all == ["x"], "the first refresh took no slot")
        let second = Task { try await gate.withSlot(for: "y", before: deadline) { await entries.add("y") } }
        try await Task.sleep(for: .milliseconds(100))
        #expect(await entries.all == ["x"])
        await release.open()
        try await first.value
        try await second.value
        #expect(await entries.all == ["x", "y"])
    }
}

/// What entered the gate, in order.
private actor Entries {
    private(set) var all: [String] = []
    func add(_ entry: String) { all.append(entry) }
}

/// Holds its waiters until it is opened.
private actor Release {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters = []
    }
}
