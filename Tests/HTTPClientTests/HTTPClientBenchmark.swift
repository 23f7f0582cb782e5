import BFFTesting
import Foundation
import HTTPClient
import Testing

/// Requests per second of `execute` with 32 concurrent tasks for 5 seconds against the URL in
/// `HTTP_CLIENT_BENCH_URL` (skipped without it). The figure in the report came from nginx on
/// loopback answering a fixed 2 KB body, `worker_processes 1`:
///
///     mkdir -p /tmp/nginx-bench && head -c 2048 /dev/zero | tr '\0' x > /tmp/nginx-bench/2k
///     cat > /tmp/nginx-bench/nginx.conf <<'CONF'
///     worker_processes 1; daemon on; pid /tmp/nginx-bench/nginx.pid; error_log /tmp/nginx-bench/error.log;
///     events { worker_connections 1024; }
///     http { access_log off; keepalive_requests 1000000;
///            server { listen 127.0.0.1:18089; location / { root /tmp/nginx-bench; } } }
///     CONF
///     nginx -c /tmp/nginx-bench/nginx.conf
///     HTTP_CLIENT_BENCH_URL=http://127.0.0.1:18089/2k \
///       swift test -c release --scratch-path .build-http --filter HTTPClientBenchmark
@Suite("HTTPClient: benchmark", .enabled(if: ProcessInfo.processInfo.environment["HTTP_CLIENT_BENCH_URL"] != nil))
struct HTTPClientBenchmark {
    @Test func executeThroughput() async throws {
        let url = try #require(ProcessInfo.processInfo.environment["HTTP_CLIENT_BENCH_URL"])
        let client = HTTPClient()
        let concurrency = 32, duration = Duration.seconds(5)
        _ = try await client.execute(HTTPClientRequest(url: url)) // warm up
        let failures = Counter()
        let end = ContinuousClock.now + duration
        let completed = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var n = 0
                    while ContinuousClock.now < end {
                        do {
                            let response = try await client.execute(HTTPClientRequest(url: url))
                            if response.status == 200 && response.body.count == 2048 { n += 1 } else { failures.increment() }
                        } catch {
                            failures.increment()
                        }
                    }
                    return n
                }
            }
            return await group.reduce(0, +)
        }
        let perSecond = Double(completed) / 5
        print("HTTPClient.execute: \(completed) requests in 5 s = \(Int(perSecond)) requests/s, \(concurrency) tasks, \(failures.current) failures")
        #expect(failures.current == 0)
        #expect(completed > 0)
    }
}
