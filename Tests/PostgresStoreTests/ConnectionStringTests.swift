@testable import PostgresStore
import Testing

@Suite("DATABASE_URL as libpq reads it")
struct ConnectionStringTests {
    @Test("a database on another host without sslmode require or stricter is warned about; sockets, loopback and TLS are not")
    func transportWarning() {
        for url in ["postgresql://bff:pw@db.example/bff", "postgresql://db.example/bff?sslmode=prefer", "host=10.0.0.5 dbname=bff",
                    "postgresql://db.example/bff?sslmode=disable", "postgresql://localhost,db.example/bff",
                    "postgresql://127.db.example/bff"] { // a name that only starts like a loopback address
            let warning = ConnectionString.transportWarning(url)
            #expect(warning?.contains("sslmode=") == true, "\(url)")
            #expect(warning?.contains("pw") != true, "the password is in the warning")
        }
        for url in ["postgresql:///bff?host=/var/run/postgresql", "postgresql://127.0.0.1/bff", "postgresql://localhost/bff",
                    "postgresql://[::1]/bff", "postgresql://db.example/bff?sslmode=require", "host=db.example sslmode=verify-full",
                    "dbname=bff", "not a connection string"] {
            #expect(ConnectionString.transportWarning(url) == nil, "\(url)")
        }
    }

    @Test("a DATABASE_URL libpq would refuse only when connecting, or misread, is a problem at start; no part of it is shown, quotes in it or not",
          arguments: [
              (#""postgresql://bff:s3cretPW@db.internal/bff""#, ""), // a value that kept its quotes (an env file)
              (#"postgresql://bff:s3cretPW@[::1]"x/db"#, ""),
              (#"host=db password=ab"c d"s3cretd"#, ""),
              ("postgresql://bff:s3cretPW@db/bff?sslmode=s3cretmode", "sslmode must be one of"),
              ("host=db port=s3cret5432 password=s3cretPW", "port must be a number"),
              ("postgresql://bff:s3cretPW@db:5432,other:x5433/bff", "port must be a number"),
              ("postgresql://bff:s3cretPW@db/bff?connect_timeout=ten", "connect_timeout must be a number"),
              // '@' or '/' left unencoded in the user info: libpq would read part of the password as
              // the host, port or database name, which its connection errors quote.
              ("postgresql://bff:s3cret@PW@db/bff", "not percent-encoded"),
              ("postgresql://bff:p@s3cret/wordPW@db.example/bff?sslmode=verify-full", "not percent-encoded"),
              ("postgresql://bff:12,s3cret/xPW@db.example/bff?sslmode=require", "not percent-encoded"),
              ("postgresql://bff:123456/s3cretPW@db.example/bff", "not percent-encoded"),
              ("postgresql://127.0.0.1:/s3cretPW@db.example/bff", "not percent-encoded"),
              // Values libpq reads and then refuses at connect.
              ("host=db connect_timeout= password=s3cretPW", "connect_timeout must be a number"),
              ("host=db port=5432,5433 password=s3cretPW", "port names 2 ports for 1 hosts"),
              ("host=db port=70000 password=s3cretPW", "port must be a number from 1 to 65535"),
              ("postgresql://bff:s3cretPW@db/bff?channel_binding=s3cret", "channel_binding must be one of"),
          ])
    func problem(url: String, says: String) {
        let problem = ConnectionString.problem(url)
        #expect(problem != nil && (says.isEmpty || problem!.contains(says)), "\(problem ?? "accepted")")
        #expect(problem?.contains("s3cret") != true && problem?.contains("PW") != true, "\(problem ?? "")")
    }

    @Test("connection strings libpq reads and connects with are no problem")
    func noProblem() {
        for url in ["postgresql://bff:pw@db.example:5432/bff?sslmode=verify-full&connect_timeout=10", "host=/run/postgresql dbname=bff",
                    "postgresql:///bff", "postgresql://a:5432,b:5433/bff?target_session_attrs=read-write", "postgresql://bff:p%40ss@db/bff",
                    "postgresql://db,other/bff?port=5432,", "host=db port=+5432 connect_timeout=' 5 '", "postgresql://bff:p%40ss%2Fw@db/b%40d"] {
            #expect(ConnectionString.problem(url) == nil, "\(url): \(ConnectionString.problem(url) ?? "")")
        }
    }

    @Test("server messages lose what they quote, whatever quotes the value itself holds")
    func redaction() {
        #expect(PostgresError.redact(#"relation "no_such" does not exist"#) == #"relation "…" does not exist"#)
        #expect(PostgresError.redact(#"invalid input syntax for type integer: "ab"c""#) == #"invalid input syntax for type integer: "…""#)
        #expect(PostgresError.redact(#"missing "=" after ""postgresql://u:s3cret@db/x"" in connection info string"#)
                    == #"missing "…" in connection info string"#)
        #expect(PostgresError.redact("no quotes here ") == "no quotes here")
        // Schema names (not class 22): each quoted part goes, the words between them stay.
        #expect(PostgresError.redact(#"insert or update on table "a" violates foreign key constraint "b""#, sqlState: "23503")
                    == #"insert or update on table "…" violates foreign key constraint "…""#)
        #expect(PostgresError.redact(#"invalid input syntax for type integer: "ab"c""#, sqlState: "22P02") == #"invalid input syntax for type integer: "…""#)
        #expect(PostgresError.redact(#"odd "one" out""#, sqlState: "42703") == #"odd "…""#)
    }
}
