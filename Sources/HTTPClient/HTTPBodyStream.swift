/// A response body delivered in pieces, with backpressure.
///
/// While more than `BodyBuffer.highWater` bytes wait for the consumer, reading from the
/// upstream pauses; it resumes once the consumer has taken most of them. So a slow consumer
/// costs at most about 1 MiB of memory per response, whatever the body's size. A consumer
/// that is behind and takes no piece for `HTTPClient.Configuration.stallTimeout` loses the
/// transfer: the pieces still waiting are dropped, its connection closes, and the next
/// read throws `isStalled`. One that keeps taking pieces, however slowly, keeps it.
///
/// The sequence ends normally only when the whole body arrived (the declared
/// `Content-Length`, the final chunk, or the connection's end when neither framing was
/// used). A truncated, stalled or failed transfer ends it with an `HTTPClientError`.
///
/// One consumer at a time. Dropping the stream, or calling `cancel()`, stops the transfer;
/// so does cancelling the task that waits in `next()`.
public final class HTTPBodyStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    let buffer: BodyBuffer

    init(buffer: BodyBuffer) { self.buffer = buffer }

    deinit { buffer.cancel() }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: HTTPBodyStream // keeps the transfer alive while iterating
        public mutating func next() async throws -> [UInt8]? { try await stream.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }

    /// The next piece of the body, or nil at its end.
    public func next() async throws(HTTPClientError) -> [UInt8]? {
        let buffer = self.buffer
        // Without suspending when a piece or the end is already here (a small body arrives
        // whole): no cancellation handler to install and remove.
        if let ready = buffer.nextIfReady() { return try ready.get() }
        let result = await withTaskCancellationHandler {
            await buffer.next()
        } onCancel: {
            buffer.cancel()
        }
        return try result.get()
    }

    /// Reads the rest of the body; more than `limit` bytes stop the transfer with
    /// `HTTPClientError.bodyTooLarge`. As for a buffered request, the whole answer must have
    /// arrived within `HTTPClient.Configuration.totalTimeout` of the request (else `isTimeout`):
    /// a caller that passes nothing on until the end is not held longer by a trickle.
    public func collect(limit: Int = .max) async throws(HTTPClientError) -> [UInt8] {
        buffer.awaitWhole()
        var all: [UInt8] = []
        while let chunk = try await next() {
            if chunk.count > limit - all.count {
                cancel()
                throw .bodyTooLarge("response body exceeds \(limit) bytes")
            }
            if all.isEmpty { all = chunk } else { all += chunk } // the first piece taken, not copied
        }
        return all
    }

    /// Stops the transfer; the consumer will not read the rest.
    public func cancel() { buffer.cancel() }

    /// The failure the transfer ended with, if it ended with one, whether or not a read
    /// has thrown it yet (a consumer held up elsewhere may learn here that its transfer was
    /// given up as stalled). Nil while it goes on, and when the whole body arrived.
    public var failure: HTTPClientError? { buffer.failure }
}
