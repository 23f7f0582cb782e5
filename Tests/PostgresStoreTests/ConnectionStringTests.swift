@testable import PostgresStore
import Testing

@Suite("DATABASE_URL as libpq reads it")
struct ConnectionStringTests {
    @Test("a database on another host without sslmode require or stricter is warned about; sockets, loopback and TLS are not")
    func transportWarning() {
        for url in ["postgresql://bff:pw@db.example/bff", "postgresql://db.example/bff?sslmode=prefer", "host=10.0.0.5 dbname=bff",
                    "postgresql://db.example/bff?sslmode=disable", "postgresql://localhost,db.example/bff"] {
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
}
