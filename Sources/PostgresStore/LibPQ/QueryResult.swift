internal import CLibPQ

/// Owns one `PGresult*`: `PQclear` runs in `deinit`, on every path. Rows are copied out
/// (text format) before the result goes, so nothing points into libpq memory afterwards.
final class QueryResult {
    private let result: OpaquePointer

    /// Takes ownership of `result` (from `PQexec`, `PQexecParams`, `PQprepare` or
    /// `PQexecPrepared`); the caller must not clear it.
    init(takingOwnershipOf result: OpaquePointer) {
        self.result = result
    }

    deinit { PQclear(result) }

    /// The rows, or the server's error as a `PostgresError`.
    func rows(context: String?) throws(PostgresError) -> [PostgresRow] {
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return []
        case PGRES_TUPLES_OK:
            return copyRows()
        default:
            throw error(context: context)
        }
    }

    /// The SQLSTATE and primary message (never the DETAIL field, which can quote values).
    func error(context: String?) -> PostgresError {
        // PG_DIAG_SQLSTATE and PG_DIAG_MESSAGE_PRIMARY are char-literal macros ('C', 'M'),
        // which Swift does not import.
        let state = field(Int32(UInt8(ascii: "C")))
        let primary = field(Int32(UInt8(ascii: "M"))) ?? String(cString: PQresultErrorMessage(result))
        return .query(sqlState: state, serverMessage: primary, context: context)
    }

    private func field(_ code: Int32) -> String? {
        PQresultErrorField(result, code).map { String(cString: $0) }
    }

    private func copyRows() -> [PostgresRow] {
        let rowCount = PQntuples(result), columns = PQnfields(result)
        var rows: [PostgresRow] = []
        rows.reserveCapacity(Int(rowCount))
        for r in 0..<rowCount {
            var values: [String?] = []
            values.reserveCapacity(Int(columns))
            for c in 0..<columns {
                values.append(PQgetisnull(result, r, c) == 1 ? nil : String(cString: PQgetvalue(result, r, c)))
            }
            rows.append(PostgresRow(values: values))
        }
        return rows
    }
}
