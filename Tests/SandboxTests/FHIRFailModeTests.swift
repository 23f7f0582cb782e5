import Foundation
import HTTPClient
import JSON
import Sandbox
import Testing

@Suite("Sandbox FHIR fail modes and large bodies")
struct FHIRFailModeTests {
    private func bearer(_ h: SandboxHarness) async throws -> [(String, String)] {
        [("Authorization", "Bearer " + (try #require(try await h.accessTokens()["access_token"]?.stringValue)))]
    }

    @Test("fhirDown: 503 OperationOutcome until switched back")
    func down() async throws {
        try await SandboxHarness.with({ $0.fhirDown = true }) { h in
            let auth = try await bearer(h)
            let down = try await h.get(h.sandbox.fhirBaseURL + "/Patient/pat-1", headers: auth)
            #expect(try down.status == 503 && (SandboxHarness.json(down))["resourceType"]?.stringValue == "OperationOutcome")
            await h.sandbox.state.setFHIRDown(false)
            #expect(try await h.get(h.sandbox.fhirBaseURL + "/Patient/pat-1", headers: auth).status == 200)
        }
    }

    @Test("fhirDelay: answers come no sooner than the delay")
    func delay() async throws {
        try await SandboxHarness.with { h in
            let auth = try await bearer(h)
            // Long enough that a stall of a loaded machine cannot pass for the delay below.
            await h.sandbox.state.setFHIRDelay(.seconds(8))
            let clock = ContinuousClock()
            let start = clock.now
            #expect(try await h.get(h.sandbox.fhirBaseURL + "/Patient/pat-1", headers: auth).status == 200)
            #expect(clock.now - start >= .seconds(8))
            // Switched off after a delay far longer than anything this task can be held back:
            // the answer comes long before that delay would have ended (and the client's 30 s
            // read timeout would end a read still delayed).
            await h.sandbox.state.setFHIRDelay(.seconds(300))
            await h.sandbox.state.setFHIRDelay(nil)
            let again = clock.now
            #expect(try await h.get(h.sandbox.fhirBaseURL + "/Patient/pat-1", headers: auth).status == 200)
            #expect(clock.now - again < .seconds(60)) // the delay is gone
        }
    }

    @Test("closeMidBody: the connection closes before the declared body is complete")
    func closeMidBody() async throws {
        try await SandboxHarness.with { h in
            let auth = try await bearer(h)
            await h.sandbox.state.setCloseMidBody(true)
            await #expect(throws: HTTPClientError.self) {
                try await h.get(h.sandbox.fhirBaseURL + "/Patient/pat-1", headers: auth)
            }
            await h.sandbox.state.setCloseMidBody(false)
            #expect(try await h.get(h.sandbox.fhirBaseURL + "/Patient/pat-1", headers: auth).status == 200)
        }
    }

    @Test("Binary/large streams a JSON body of exactly the requested size", arguments: [64, 100_000, 3_000_001])
    func largeBody(size: Int) async throws {
        try await SandboxHarness.with { h in
            let response = try await h.get(h.sandbox.fhirBaseURL + "/Binary/large?size=\(size)", headers: try await bearer(h))
            #expect(response.status == 200 && response.body.count == size)
            #expect(response.header("Content-Length") == String(size))
            let binary = try SandboxHarness.json(response)
            #expect(binary["resourceType"]?.stringValue == "Binary")
        }
    }
}
