@testable import BFF
import Foundation
import HTTPClient
import Logging
import Testing

@Suite("the FHIR proxy's log of EHRs it cannot reach")
struct UpstreamFailureLogTests {
    @Test("an outage is one line, a summary a minute while it lasts, and one line when it ends; issuers apart")
    func paced() {
        let sink = LogSink()
        let log = UpstreamFailureLog(logger: Logger(label: "test") { JSONLogHandler(label: $0, sink: sink) })
        let t0 = Date(timeIntervalSince1970: 1_000_000)
        let a = "https://a.example/fhir", b = "https://b.example/fhir"
        log.answered(iss: a, now: t0) // nothing to end
        for second in [0.0, 1, 30, 59] { log.failed(iss: a, detail: HTTPClientError.timedOut().debugDescription, now: t0 + second) }
        log.failed(iss: b, detail: HTTPClientError.connectFailed().debugDescription, now: t0 + 2)
        #expect(sink.captured.count == 2) // the first failure of each issuer
        log.failed(iss: a, detail: HTTPClientError.timedOut().debugDescription, now: t0 + 61)
        log.failed(iss: a, detail: HTTPClientError.timedOut().debugDescription, now: t0 + 62)
        let summary = sink.captured.filter { $0.contains("still fail") }
        #expect(summary.count == 1 && summary[0].contains(a) && summary[0].contains("\"upstream.failures\":\"5\""))
        log.answered(iss: a, now: t0 + 70)
        log.answered(iss: a, now: t0 + 71)
        let ended = sink.captured.filter { $0.contains("answered again") }
        #expect(ended.count == 1 && ended[0].contains(a) && ended[0].contains("\"upstream.failures\":\"6\"")
                && ended[0].contains("\"upstream.outage_seconds\":\"70.0\""))
        log.answered(iss: b, now: t0 + 72)
        #expect(sink.captured.filter { $0.contains("answered again") && $0.contains(b) }.count == 1)
        #expect(sink.captured.count == 5)
        // At the outage's level: a log kept at warning shows the end as it showed the start.
        #expect(sink.captured.allSatisfy { $0.contains("\"level\":\"warning\"") }, "\(sink.captured)")
    }
}
