internal import CCurl
import Foundation

/// smart-bff's outbound HTTP/1.1 client, over libcurl: pooled keep-alive connections, TLS
/// verification on by default, no redirects followed (callers see them), timeouts that end
/// in `HTTPClientError.isTimeout`, and truncated bodies reported as errors.
/// (URLSession on Linux reached only ~4k requests/s on these machines.)
public final class HTTPClient: Sendable {
    public struct Configuration: Sendable {
        /// Time to establish a connection (TCP and TLS). Default 5 s.
        public var connectTimeout: Duration = .seconds(5)
        /// Time allowed for the response head, and for any stall in the body. Default 30 s.
        public var readTimeout: Duration = .seconds(30)
        /// Connections kept per upstream host. Default 64.
        public var maxConnectionsPerHost = 64
        /// Largest body `execute` buffers. Default 16 MiB.
        public var maxResponseBodyBytes = 16 << 20
        /// Verify TLS certificates and host names. Default on.
        public var verifyTLS = true

        public init() {}
    }

    public let configuration: Configuration
    private let engine: CurlEngine

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        engine = CurlEngine(maxConnectionsPerHost: configuration.maxConnectionsPerHost)
    }

    deinit { engine.send(.stop) }

    /// Sends `request` and returns the whole response.
    public func execute(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientResponse {
        do {
            return try await withCheckedThrowingContinuation { continuation in
                guard let transfer = makeTransfer(request, mode: .buffered(maxBytes: configuration.maxResponseBodyBytes, continuation)) else {
                    continuation.resume(throwing: HTTPClientError(.other, "curl_easy_init failed"))
                    return
                }
                engine.send(.add(transfer))
            }
        } catch let error as HTTPClientError {
            throw error
        } catch {
            throw HTTPClientError(.other, "unexpected failure")
        }
    }

    /// Sends `request` and returns as soon as the response head has arrived; the body
    /// follows through `response.body`.
    public func stream(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientStreamingResponse {
        do {
            return try await withCheckedThrowingContinuation { continuation in
                guard let transfer = makeTransfer(request, mode: .streaming(continuation)) else {
                    continuation.resume(throwing: HTTPClientError(.other, "curl_easy_init failed"))
                    return
                }
                let engine = self.engine
                transfer.stream = HTTPBodyStream(resume: { [weak transfer] in if let transfer { engine.send(.resume(transfer)) } },
                                                 cancel: { [weak transfer] in if let transfer { engine.send(.cancel(transfer)) } })
                engine.send(.add(transfer))
            }
        } catch let error as HTTPClientError {
            throw error
        } catch {
            throw HTTPClientError(.other, "unexpected failure")
        }
    }

    private func makeTransfer(_ request: HTTPClientRequest, mode: CurlTransfer.Mode) -> CurlTransfer? {
        guard let easy = curl_easy_init() else { return nil }
        let deadline = ProcessInfo.processInfo.systemUptime + Double(configuration.readTimeout.milliseconds) / 1000
            + Double(configuration.connectTimeout.milliseconds) / 1000
        let transfer = CurlTransfer(easy: easy, request: request, mode: mode, headDeadline: deadline)
        transfer.configure(request, configuration: configuration)
        return transfer
    }
}
