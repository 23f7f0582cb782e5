@testable import BFF
import Foundation
import Testing

@Suite("metrics")
struct MetricsTests {
    @Test("requests recorded from many threads at once all count: the exposition adds up every recorder")
    func countsAddUpAcrossThreads() {
        let metrics = Metrics()
        let recorders = (0..<4).map { _ in metrics.makeRequestRecorder() }
        DispatchQueue.concurrentPerform(iterations: 16) { i in
            for k in 0..<500 { recorders[i % 4].record(route: "/fhir/*", status: k % 5 == 0 ? 404 : 200, seconds: i % 2 == 0 ? 0.002 : 0.2) }
        }
        let text = metrics.render(activeSessions: nil, pool: nil, audit: .init(pending: 3, written: 7, failedWrites: 2))
        #expect(text.contains(#"bff_http_requests_total{route="/fhir/*",status="200"} 6400"#))
        #expect(text.contains(#"bff_http_requests_total{route="/fhir/*",status="404"} 1600"#))
        #expect(text.contains(#"bff_http_request_duration_seconds_count{route="/fhir/*"} 8000"#))
        #expect(text.contains(#"bff_http_request_duration_seconds_bucket{route="/fhir/*",le="0.0025"} 4000"#))
        #expect(text.contains(#"bff_http_request_duration_seconds_bucket{route="/fhir/*",le="+Inf"} 8000"#))
        #expect(text.contains("bff_audit_pending_entries 3\n") && text.contains("bff_audit_written_entries_total 7\n"))
        #expect(text.contains("bff_audit_write_failures_total 2\n"))
    }
}
