import BFF
import BFFTesting
import Foundation
import JSON
import Testing

/// smart-bff in front of an EHR reached over https, as in every real deployment: the sandbox
/// behind a real TLS server whose certificate comes from a private CA.
@Suite("an EHR over TLS")
struct TLSUpstreamTests {
    @Test("with BFF_TLS_CA_FILE naming the EHR's CA: login, token, ID-token keys and FHIR reads all work over https")
    func trustedPrivateCA() async throws {
        let h = try await BFFHarness.start(ehrOverTLS: true)
        defer { Task { await h.stop() } }
        #expect(h.sandbox.fhirBaseURL.hasPrefix("https://localhost:"))
        let browser = Browser(client: h.client)
        let (done, launch) = try await h.standaloneLogin(browser)
        #expect(done.status == 302)
        let read = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(read.status == 200)
        #expect(try JSONParser.parse(read.body)["id"]?.stringValue == "pat-1")
        #expect(await h.sandbox.state.fhirRequests == 1)
        #expect((h.ehrTLS?.completedHandshakes ?? 0) >= 1)
        // The start-up line says which CAs are trusted, and which EHRs are registered.
        let serving = try #require(h.logs.captured.first { $0.contains("\"msg\":\"serving\"") })
        #expect(serving.contains(try TestCertificates.caFile()) && serving.contains(h.sandbox.fhirBaseURL))
        #expect(!serving.contains(h.database.url))
    }

    @Test("without the EHR's CA the certificate is refused: 502 at login, and nothing reaches the EHR")
    func untrustedCA() async throws {
        let h = try await BFFHarness.start(ehrOverTLS: true, bffTrustsTestCA: false)
        defer { Task { await h.stop() } }
        let login = try await Browser(client: h.client).request(h.baseURL + "/login")
        #expect(login.status == 502)
        #expect(login.header("Content-Type") == "application/problem+json")
        #expect(h.ehrTLS?.completedHandshakes == 0)
        // The server's thread counts the refusal once it reads the client's alert, which may
        // come after the client has answered: a no-hang limit, not a measure.
        let deadline = ContinuousClock.now + .seconds(30)
        while (h.ehrTLS?.refusedHandshakes ?? 0) < 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect((h.ehrTLS?.refusedHandshakes ?? 0) >= 1)
        #expect(await h.sandbox.state.tokenRequests == 0)
        // The client learns the kind of failure; the operator's log has OpenSSL's reason.
        #expect(login.text.contains("TLS failure"))
        let warning = try #require(h.logs.captured.first { $0.contains("EHR discovery failed") })
        #expect(warning.contains("certificate") && warning.contains(h.sandbox.fhirBaseURL))
        // /readyz, where operators look first, names the kind of failure per issuer.
        let ready = try await Browser(client: h.client).request(h.baseURL + "/readyz").text
        #expect(ready.contains("discovery request failed: TLS failure"), "\(ready)")
    }

    @Test("an EHR certificate that stops being trusted: 502, counted as a TLS error, logged once with its cause and again on recovery")
    func certificateNoLongerTrusted() async throws {
        let h = try await BFFHarness.start(ehrOverTLS: true)
        defer { Task { await h.stop() } }
        let tls = try #require(h.ehrTLS)
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        let read = h.baseURL + "/fhir/Patient/pat-1"
        #expect(try await browser.api(read, launch: launch).status == 200)

        try tls.present(TestCertificates.selfSigned)
        for _ in 0..<3 { #expect(try await browser.api(read, launch: launch).status == 502) }
        let failing = h.logs.captured.filter { $0.contains("FHIR requests to the EHR") && $0.contains("\"level\":\"warning\"") }
        #expect(failing.count == 1) // not one line per request
        #expect(failing.first?.contains("FHIR requests to the EHR fail") == true)
        #expect(failing.first?.contains("certificate") == true)
        let metrics = try await browser.request(h.baseURL + "/metrics").text
        #expect(metrics.contains("bff_upstream_errors_total{kind=\"tls\"} 3"))

        try tls.present(TestCertificates.localhost)
        #expect(try await browser.api(read, launch: launch).status == 200)
        let recovered = h.logs.captured.filter { $0.contains("FHIR requests to the EHR are answered again") }
        #expect(recovered.count == 1)
        #expect(recovered.first?.contains("\"upstream.failures\":\"3\"") == true)
    }

    @Test("an EHR that breaks off mid-body over TLS: never a complete-looking 200")
    func truncatedOverTLS() async throws {
        let h = try await BFFHarness.start(ehrOverTLS: true)
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.setCloseMidBody(true)
        let page = try? await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(page == nil || page?.status == 502, "\(page?.status ?? 0)")
        let metrics = try await browser.request(h.baseURL + "/metrics").text
        // Counted as a truncation however early the body broke off (with all of it in one
        // read, before the head was handed over, too), never as an EHR out of reach.
        #expect(metrics.contains("bff_upstream_errors_total{kind=\"truncated\"} 1"), "\(metrics.split(separator: "\n").filter { $0.contains("upstream_errors") })")
        #expect(!h.logs.captured.contains { $0.contains("FHIR requests to the EHR fail") })
    }
}
