internal import CCurl
import Synchronization

/// One request in flight. It borrows an easy handle from the pool and owns what the handle's
/// options point at (header list, request body) until it goes.
///
/// The calling task builds it and sets `delivery`; from `CurlMulti.submit` on, only the
/// multi handle's loop thread touches it (the submit runs on that thread, or is posted to it),
/// except for `cancelRequested`, which is atomic. Hence `@unchecked Sendable`.
final class CurlTransfer: @unchecked Sendable {
    enum Delivery {
        case buffered(CheckedContinuation<Result<HTTPClientResponse, HTTPClientError>, Never>)
        case streaming(CheckedContinuation<Result<HTTPClientStreamingResponse, HTTPClientError>, Never>)
    }

    let easy: CurlEasy
    /// Where the result goes; nil once a streaming head has been handed over.
    var delivery: Delivery?
    /// Streaming only: the body's hand-over buffer.
    private(set) var bodyBuffer: BodyBuffer?
    /// Set by the caller's cancellation handler; the multi handle checks it when adding.
    let cancelRequested = Atomic(false)
    /// Streaming only: the multi handle told when the head is complete. It holds the
    /// transfer while it runs, and the head completes only inside its actions.
    private unowned(unsafe) var multi: CurlMulti?

    // Loop thread only.
    /// libcurl was told to pause (the consumer is behind).
    var paused = false
    /// Streaming: the final head is complete and waits for the end of libcurl's action.
    private(set) var headReady = false
    /// Monotonic nanoseconds after which, without new data, the transfer times out.
    var deadline: UInt64 = 0
    private(set) var finished = false
    private var head = ResponseHead()
    private var body: [UInt8] = []
    private var tooLarge = false
    private let maxBodyBytes: Int
    private let readTimeout: UInt64

    // Kept alive for the options that point at them.
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let requestBody: UnsafeMutableBufferPointer<UInt8>?

    /// Configures `easy` (freshly reset) for `request`.
    init(easy: CurlEasy, request: HTTPClientRequest, configuration: HTTPClient.Configuration, streaming: Bool) {
        self.easy = easy
        maxBodyBytes = streaming ? .max : configuration.maxResponseBodyBytes
        readTimeout = configuration.readTimeout.nanoseconds
        if let body = request.body {
            let copy = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, body.count))
            _ = copy.initialize(from: body)
            requestBody = copy
        } else {
            requestBody = nil
        }
        for (name, value) in request.headers {
            // "Name;" is libcurl's spelling of a field with an empty value ("Name:" would remove it).
            headerList = curl_slist_append(headerList, value.isEmpty ? name + ";" : name + ": " + value)
        }
        // No "Expect: 100-continue" round trip before larger bodies.
        headerList = curl_slist_append(headerList, "Expect:")
        // Without Accept-Encoding a server may compress (RFC 9110 §12.5.3), and nothing here
        // decodes: ask for the body as it is, unless the caller chose otherwise.
        if !request.headers.contains(where: { $0.0.equalsIgnoringASCIICase("Accept-Encoding") }) {
            headerList = curl_slist_append(headerList, "Accept-Encoding: identity")
        }
        configure(request, configuration)
    }

    deinit {
        curl_slist_free_all(headerList)
        requestBody?.deallocate()
    }

    /// Streaming only: the buffer the body goes through, with the requests it makes of `multi`.
    func makeBodyBuffer(multi: CurlMulti) {
        self.multi = multi
        // Strong: the buffer lets these go when the transfer ends (see BodyBuffer.State).
        bodyBuffer = BodyBuffer(resume: { multi.resume(self) }, cancel: { multi.cancel(self) })
    }

    private func configure(_ request: HTTPClientRequest, _ configuration: HTTPClient.Configuration) {
        let h = easy.handle
        easy.attachErrorBuffer()
        bff_curl_setopt_ptr(h, CURLOPT_URL, request.url)
        bff_curl_setopt_ptr(h, CURLOPT_PROTOCOLS_STR, "http,https")
        bff_curl_setopt_long(h, CURLOPT_NOSIGNAL, 1)
        bff_curl_setopt_cloexec_sockets(h) // child processes never hold our connections
        bff_curl_setopt_long(h, CURLOPT_FOLLOWLOCATION, 0) // callers see redirects
        bff_curl_setopt_long(h, CURLOPT_TCP_NODELAY, 1)
        // HTTP/1.1 only: libcurl would otherwise speak HTTP/2 to every https server that offers
        // it (most EHR front doors do), a protocol path with its own framing, flow control and
        // failure modes that nothing here is tested or sized for (connections per host assume
        // one request per connection).
        bff_curl_setopt_long(h, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        bff_curl_setopt_long(h, CURLOPT_PATH_AS_IS, 1) // the caller's path goes out unchanged
        // Through a proxy (the usual *_proxy environment variables), the proxy's CONNECT
        // answer must not reach the header callback as if it were the response.
        bff_curl_setopt_long(h, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        bff_curl_setopt_long(h, CURLOPT_CONNECTTIMEOUT_MS, Int(clamping: configuration.connectTimeout.nanoseconds / 1_000_000))
        bff_curl_setopt_long(h, CURLOPT_SSL_VERIFYPEER, configuration.verifyTLS ? 1 : 0)
        bff_curl_setopt_long(h, CURLOPT_SSL_VERIFYHOST, configuration.verifyTLS ? 2 : 0)
        if let caFile = configuration.caCertificatesFile {
            bff_curl_setopt_ptr(h, CURLOPT_CAINFO, caFile)
            // Only the file: builds with a default CA directory (Debian's: /etc/ssl/certs)
            // would trust that directory's certificates as well.
            bff_curl_setopt_ptr(h, CURLOPT_CAPATH, nil)
        }
        if let proxy = configuration.proxy { bff_curl_setopt_ptr(h, CURLOPT_PROXY, proxy) }
        bff_curl_setopt_ptr(h, CURLOPT_USERAGENT, "smart-bff")
        bff_curl_setopt_ptr(h, CURLOPT_HTTPHEADER, headerList)
        if maxBodyBytes != .max {
            // Refuses a too-large declared Content-Length before reading the body.
            bff_curl_setopt_long(h, CURLOPT_MAXFILESIZE, min(maxBodyBytes, Int(Int32.max)))
        }
        switch request.method {
        case "GET": bff_curl_setopt_long(h, CURLOPT_HTTPGET, 1)
        case "HEAD": bff_curl_setopt_long(h, CURLOPT_NOBODY, 1)
        case "POST": break // set by POSTFIELDS below
        default: bff_curl_setopt_ptr(h, CURLOPT_CUSTOMREQUEST, request.method)
        }
        if let requestBody {
            bff_curl_setopt_long(h, CURLOPT_POSTFIELDSIZE, request.body?.count ?? 0)
            bff_curl_setopt_ptr(h, CURLOPT_POSTFIELDS, requestBody.baseAddress)
        } else if ["POST", "PUT", "PATCH"].contains(request.method) {
            // An empty body, with "Content-Length: 0" (servers may answer 411 without it).
            bff_curl_setopt_long(h, CURLOPT_POSTFIELDSIZE, 0)
            bff_curl_setopt_ptr(h, CURLOPT_POSTFIELDS, "")
        }
        let me = Unmanaged.passUnretained(self).toOpaque() // valid while the multi handle holds the transfer
        bff_curl_setopt_callback(h, CURLOPT_HEADERFUNCTION, curlHeaderCallback)
        bff_curl_setopt_ptr(h, CURLOPT_HEADERDATA, me)
        bff_curl_setopt_callback(h, CURLOPT_WRITEFUNCTION, curlWriteCallback)
        bff_curl_setopt_ptr(h, CURLOPT_WRITEDATA, me)
        bff_curl_setopt_prereq(h, curlPrereqCallback)
        bff_curl_setopt_ptr(h, CURLOPT_PREREQDATA, me)
    }

    /// Loop thread: the transfer is (again) receiving; the read timeout restarts.
    func touch() { deadline = monotonicNanoseconds() + readTimeout }

    /// Loop thread: the deadline while connecting (or waiting for a connection): the
    /// connect timeout, then the read timeout. libcurl enforces the first on its own.
    func startClock(connectTimeout: UInt64) { deadline = monotonicNanoseconds() + connectTimeout + readTimeout }

    /// Loop thread: one header line from libcurl.
    fileprivate func headerLine(_ line: UnsafeRawBufferPointer) {
        touch()
        if head.consume(line) { headComplete() }
    }

    private func headComplete() {
        if case .streaming = delivery, bodyBuffer != nil {
            headReady = true // handed over once libcurl's action returns: see deliverHeadIfReady
            multi?.headReady(self)
        } else if let length = head.contentLength, length <= maxBodyBytes {
            body.reserveCapacity(length)
        }
    }

    /// Loop thread, after each libcurl action: hands a completed streaming head to the caller.
    /// Waiting for the end of the action means that a small response that arrived whole is
    /// handed over whole (head, body and end at once), with one resumption of the caller
    /// instead of one per piece.
    func deliverHeadIfReady() {
        guard headReady, case let .streaming(continuation) = delivery, let bodyBuffer else { return }
        headReady = false
        delivery = nil
        continuation.resume(returning: .success(
            HTTPClientStreamingResponse(status: head.status, headers: head.headers, body: HTTPBodyStream(buffer: bodyBuffer))))
    }

    /// Loop thread: a piece of body. Returns how many bytes were taken, or the pause signal.
    fileprivate func bodyBytes(_ bytes: UnsafeRawBufferPointer) -> Int {
        touch()
        if let bodyBuffer {
            if delivery != nil && !headReady { headComplete() } // a body before the head ended: cannot happen over HTTP/1.1+
            if bodyBuffer.deliver(bytes) { return bytes.count }
            paused = true
            return bff_curl_writefunc_pause
        }
        if bytes.count > maxBodyBytes - body.count {
            tooLarge = true
            return 0 // libcurl stops with CURLE_WRITE_ERROR
        }
        body.append(contentsOf: bytes)
        return bytes.count
    }

    /// Loop thread: libcurl finished the transfer with `code`.
    func complete(_ code: CURLcode) {
        finish(code == CURLE_OK ? .success(()) : .failure(error(for: code)))
    }

    /// Ends the transfer once: resumes the caller or ends the body stream.
    func finish(_ outcome: Result<Void, HTTPClientError>) {
        guard !finished else { return }
        finished = true
        switch delivery {
        case let .buffered(continuation)?:
            let body = self.body
            continuation.resume(returning: outcome.map { HTTPClientResponse(status: head.status, headers: head.headers, body: body) })
        case let .streaming(continuation)?:
            switch outcome {
            case let .failure(error):
                bodyBuffer?.finish(.failure(error)) // lets its hold on this transfer go
                continuation.resume(returning: .failure(error))
            case .success:
                // A finished transfer whose head libcurl did not end with an empty line.
                let buffer = bodyBuffer ?? BodyBuffer(resume: {}, cancel: {})
                continuation.resume(returning: .success(
                    HTTPClientStreamingResponse(status: head.status, headers: head.headers, body: HTTPBodyStream(buffer: buffer))))
                buffer.finish(.success(()))
            }
        case nil:
            bodyBuffer?.finish(outcome)
        }
        delivery = nil
        body = []
    }

    /// Turns libcurl's result into our error, without the URL.
    private func error(for code: CURLcode) -> HTTPClientError {
        let text = String(cString: curl_easy_strerror(code))
        let error: HTTPClientError
        switch code {
        case _ where tooLarge, CURLE_FILESIZE_EXCEEDED:
            error = .bodyTooLarge()
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            error = .connectFailed(text)
        case CURLE_OPERATION_TIMEDOUT:
            error = .timedOut(text)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_CRL_BADFILE:
            error = .tls(text)
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            error = .invalidRequest(text)
        case CURLE_GOT_NOTHING, CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING:
            error = .malformedResponse(text)
        case _ where head.isComplete:
            // The head arrived and the body did not end as declared (CURLE_PARTIAL_FILE,
            // CURLE_RECV_ERROR on a bad or unterminated chunked body, a reset, ...).
            error = .truncated(text)
        default:
            error = .other(text)
        }
        return error.withCurl(code: Int(code.rawValue), detail: easy.errorText)
    }
}

/// CURLOPT_HEADERFUNCTION; `userdata` is the unretained `CurlTransfer`.
private func curlHeaderCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ userdata: UnsafeMutableRawPointer?) -> Int {
    guard let data, let userdata else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    transfer.headerLine(UnsafeRawBufferPointer(start: data, count: size * count))
    return size * count
}

/// CURLOPT_PREREQFUNCTION: a connection is ready and the request is about to go, so the
/// read timeout runs from now. `clientp` is the unretained `CurlTransfer`.
private func curlPrereqCallback(_ clientp: UnsafeMutableRawPointer?, _ primaryIP: UnsafeMutablePointer<CChar>?,
                                _ localIP: UnsafeMutablePointer<CChar>?, _ primaryPort: Int32, _ localPort: Int32) -> Int32 {
    if let clientp { Unmanaged<CurlTransfer>.fromOpaque(clientp).takeUnretainedValue().touch() }
    return 0 // CURL_PREREQFUNC_OK
}

/// CURLOPT_WRITEFUNCTION; `userdata` is the unretained `CurlTransfer`.
private func curlWriteCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ userdata: UnsafeMutableRawPointer?) -> Int {
    guard let data, let userdata else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    return transfer.bodyBytes(UnsafeRawBufferPointer(start: data, count: size * count))
}
