internal import CCurl
import Foundation

/// One request in flight: owns its easy handle and header list, and is touched only on the
/// engine thread (hence `@unchecked Sendable`), except through `HTTPBodyStream`'s lock.
final class CurlTransfer: @unchecked Sendable {
    enum Mode {
        case buffered(maxBytes: Int, CheckedContinuation<HTTPClientResponse, any Error>)
        case streaming(CheckedContinuation<HTTPClientStreamingResponse, any Error>)
    }

    let easy: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let requestBody: UnsafeMutableBufferPointer<UInt8>?
    var mode: Mode
    var status = 0
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []
    var headDelivered = false
    var tooLarge = false
    var stream: HTTPBodyStream?
    /// When the response head must have arrived.
    let headDeadline: Double
    var finished = false

    init(easy: UnsafeMutableRawPointer, request: HTTPClientRequest, mode: Mode, headDeadline: Double) {
        self.easy = easy
        self.mode = mode
        self.headDeadline = headDeadline
        if let body = request.body {
            let copy = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, body.count))
            _ = copy.initialize(from: body)
            requestBody = copy
        } else {
            requestBody = nil
        }
        var list: UnsafeMutablePointer<curl_slist>?
        for (name, value) in request.headers {
            // Header values never carry CR or LF onto the wire.
            let line = name + ": " + value.filter { $0 != "\r" && $0 != "\n" }
            list = curl_slist_append(list, line)
        }
        list = curl_slist_append(list, "Expect:")
        headerList = list
    }

    deinit {
        curl_slist_free_all(headerList)
        curl_easy_cleanup(easy)
        requestBody?.deallocate()
    }

    /// Applies the request's options to the easy handle.
    func configure(_ request: HTTPClientRequest, configuration: HTTPClient.Configuration) {
        bff_curl_setopt_ptr(easy, CURLOPT_URL, request.url)
        bff_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        bff_curl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0)
        bff_curl_setopt_ptr(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        bff_curl_setopt_long(easy, CURLOPT_TCP_NODELAY, 1)
        // Send the path exactly as given: callers decide what is safe, curl must not rewrite it.
        bff_curl_setopt_long(easy, CURLOPT_PATH_AS_IS, 1)
        bff_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout.milliseconds))
        bff_curl_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
        bff_curl_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, max(1, Int(configuration.readTimeout.milliseconds / 1000)))
        bff_curl_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, configuration.verifyTLS ? 1 : 0)
        bff_curl_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, configuration.verifyTLS ? 2 : 0)
        bff_curl_setopt_ptr(easy, CURLOPT_USERAGENT, "smart-bff")
        bff_curl_setopt_ptr(easy, CURLOPT_HTTPHEADER, headerList)
        switch request.method {
        case "GET": bff_curl_setopt_long(easy, CURLOPT_HTTPGET, 1)
        case "HEAD": bff_curl_setopt_long(easy, CURLOPT_NOBODY, 1)
        default: bff_curl_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, request.method)
        }
        if let requestBody {
            bff_curl_setopt_long(easy, CURLOPT_POSTFIELDSIZE, request.body?.count ?? 0)
            bff_curl_setopt_ptr(easy, CURLOPT_POSTFIELDS, requestBody.baseAddress)
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        bff_curl_setopt_callback(easy, CURLOPT_HEADERFUNCTION, curlHeaderCallback)
        bff_curl_setopt_ptr(easy, CURLOPT_HEADERDATA, me)
        bff_curl_setopt_callback(easy, CURLOPT_WRITEFUNCTION, curlWriteCallback)
        bff_curl_setopt_ptr(easy, CURLOPT_WRITEDATA, me)
    }

    /// One header line from libcurl (the status line, a field, or the blank end line).
    func headerLine(_ line: String) {
        let trimmed = line.trimmingCharacters(in: CharacterSet(charactersIn: "\r\n"))
        if trimmed.hasPrefix("HTTP/") {
            let parts = trimmed.split(separator: " ", maxSplits: 2)
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            headers = []
        } else if let colon = trimmed.firstIndex(of: ":") {
            let name = String(trimmed[..<colon])
            let value = trimmed[trimmed.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append((name: name, value: value))
        }
    }

    /// A piece of body. Returns false to pause the transfer (the piece is delivered again later).
    func bodyBytes(_ bytes: UnsafeRawBufferPointer) -> Bool? {
        switch mode {
        case let .buffered(maxBytes, _):
            if body.count + bytes.count > maxBytes { tooLarge = true; return nil }
            body.append(contentsOf: bytes)
            return true
        case .streaming:
            deliverHead()
            return stream!.deliver(Array(bytes))
        }
    }

    /// Hands the head to a streaming caller, once.
    func deliverHead() {
        guard !headDelivered, case let .streaming(continuation) = mode, let stream else { return }
        headDelivered = true
        continuation.resume(returning: HTTPClientStreamingResponse(status: status, headers: headers, body: stream))
    }

    /// Ends the transfer with libcurl's result.
    func complete(_ result: CURLcode) {
        guard !finished else { return }
        finished = true
        let error = result == CURLE_OK ? nil : CurlTransfer.error(for: result, afterHead: status != 0, tooLarge: tooLarge)
        finish(error)
    }

    func finish(_ error: HTTPClientError?) {
        switch mode {
        case let .buffered(_, continuation):
            if let error { continuation.resume(throwing: error) } else {
                continuation.resume(returning: HTTPClientResponse(status: status, headers: headers, body: body))
            }
        case let .streaming(continuation):
            if headDelivered {
                stream?.finish(error)
            } else if let error {
                continuation.resume(throwing: error)
            } else {
                deliverHead()
                stream?.finish(nil)
            }
        }
    }

    static func error(for code: CURLcode, afterHead: Bool, tooLarge: Bool) -> HTTPClientError {
        let text = String(cString: curl_easy_strerror(code))
        let raw = Int(code.rawValue)
        if tooLarge { return HTTPClientError(.bodyTooLarge, curlCode: raw, "response body too large") }
        switch code {
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return HTTPClientError(.connectFailed, curlCode: raw, text)
        case CURLE_OPERATION_TIMEDOUT:
            return HTTPClientError(.timedOut, curlCode: raw, text)
        case CURLE_PARTIAL_FILE, CURLE_RECV_ERROR:
            return HTTPClientError(afterHead ? .truncated : .malformedResponse, curlCode: raw, text)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CACERT_BADFILE:
            return HTTPClientError(.tls, curlCode: raw, text)
        case CURLE_GOT_NOTHING, CURLE_WEIRD_SERVER_REPLY:
            return HTTPClientError(.malformedResponse, curlCode: raw, text)
        case CURLE_WRITE_ERROR, CURLE_ABORTED_BY_CALLBACK:
            return HTTPClientError(.cancelled, curlCode: raw, text)
        default:
            return HTTPClientError(afterHead ? .truncated : .other, curlCode: raw, text)
        }
    }
}

/// CURLOPT_HEADERFUNCTION: `userdata` is the unretained `CurlTransfer`.
private func curlHeaderCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ userdata: UnsafeMutableRawPointer?) -> Int {
    guard let data, let userdata else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    transfer.headerLine(String(decoding: UnsafeRawBufferPointer(start: data, count: size * count), as: UTF8.self))
    return size * count
}

/// CURLOPT_WRITEFUNCTION: `userdata` is the unretained `CurlTransfer`.
private func curlWriteCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ userdata: UnsafeMutableRawPointer?) -> Int {
    guard let data, let userdata else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    switch transfer.bodyBytes(UnsafeRawBufferPointer(start: data, count: size * count)) {
    case true?: return size * count
    case false?: return bff_curl_writefunc_pause
    case nil: return 0
    }
}

extension Duration {
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
