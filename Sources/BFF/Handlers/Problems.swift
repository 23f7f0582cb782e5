import HTTPCore

/// The problem types smart-bff answers with (RFC 9457 `type` URIs).
enum Problems {
    static let base = "https://smart-bff.dev/problems/"

    static func badRequest(_ detail: String, type: String = "invalid-request") -> HTTPError {
        HTTPError(.badRequest, type: base + type, detail: detail)
    }

    static func unauthenticated(_ detail: String = "No valid session.") -> HTTPError {
        HTTPError(.unauthorized, type: base + "no-session", detail: detail)
    }

    static func sessionEnded(_ detail: String = "The EHR no longer accepts this session's grant; sign in again.") -> HTTPError {
        HTTPError(.unauthorized, type: base + "session-ended", title: "Session ended", detail: detail)
    }

    /// A launch whose tokens are gone (deleted since it was read) or do not open with this
    /// server's keys: no call can be made for it.
    static func tokensUnreadable() -> HTTPError {
        sessionEnded("This launch's tokens are gone (its grant ended, or it was signed out elsewhere) or cannot be read by this server (a token key it lacks); sign in again.")
    }

    /// A launch whose EHR is no longer in the issuers file: it is not contacted again.
    static func issuerNotRegistered() -> HTTPError {
        sessionEnded("This launch's EHR is no longer registered with this server; sign in again.")
    }

    static func csrf() -> HTTPError {
        HTTPError(.forbidden, type: base + "csrf", title: "Missing X-CSRF header",
                  detail: "Requests authenticated by the session cookie must send the header X-CSRF: 1.")
    }

    /// A `/fhir` read the launch's scopes do not allow; nothing went upstream.
    static func outsideScopes(_ detail: String) -> HTTPError {
        HTTPError(.forbidden, type: base + "scope", title: "Outside the granted scopes", detail: detail)
    }

    static func pageOfAnotherLaunch() -> HTTPError {
        HTTPError(.forbidden, type: base + "page-of-another-launch", title: "Not this launch's page",
                  detail: "This page of search results is not one of this launch's own searches (or its link was altered): "
                      + "follow the links in this launch's own Bundles.")
    }

    /// The launch's own reads held every EHR connection it may use for longer than a read
    /// may wait: this one was never sent.
    static func tooManyReads() -> HTTPError {
        HTTPError(.tooManyRequests, type: base + "too-many-reads", title: "Too many reads at once",
                  detail: "This launch's other reads kept every connection to the EHR it may use busy for too long; "
                      + "this one was not sent. Send fewer at once, or try again.")
    }

    static func databaseUnavailable() -> HTTPError {
        HTTPError(.serviceUnavailable, type: base + "database-unavailable", title: "Session store unavailable",
                  detail: "The session store cannot serve this request right now; the session is kept, try again.")
    }

    static func auditUnavailable() -> HTTPError {
        HTTPError(.serviceUnavailable, type: base + "audit-unavailable", title: "PHI access audit unavailable",
                  detail: "Reads cannot be recorded in the audit trail right now, so none are made; the session is kept, try again.")
    }

    /// A read cut off by this process's stop (its connection is closed by then).
    static func stopping() -> HTTPError {
        HTTPError(.serviceUnavailable, type: base + "stopping", title: "Stopping",
                  detail: "smart-bff stopped while the EHR was answering; try again.")
    }

    static func upstream(_ status: HTTPStatus, _ detail: String) -> HTTPError {
        HTTPError(status, type: base + (status.code == 504 ? "upstream-timeout" : "upstream-unavailable"), detail: detail)
    }
}
