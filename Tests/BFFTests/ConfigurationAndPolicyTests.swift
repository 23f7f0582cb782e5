import BFF
import BFFTesting
import Cryptography
import Foundation
import HTTPClient
import HTTPCore
import SMART
import Testing

@Suite("configuration, cookie, return_to and discovery parsing")
struct ConfigurationAndPolicyTests {
    @Test("the ID-token keys are looked up under an issuer only over https (or loopback http), with no query: an issuer from discovery is not fetched in cleartext, nor steered to another path")
    func issuerDiscoveryOnlyOverHTTPS() async throws {
        let metadata = EHRMetadata(client: HTTPClient())
        for issuer in ["http://192.0.2.1:9/idp", "ftp://idp.example.org/", "https://user@idp.example.org/", "http://127.0.0.1:9/admin?x="] {
            do {
                _ = try await metadata.jwksURI(ofIssuer: issuer, for: "http://127.0.0.1:9/fhir")
                Issue.record("\(issuer) was used")
            } catch {
                #expect(error.detail.contains("not an absolute https URL"), "\(issuer): \(error.detail)")
            }
        }
        // An issuer on this machine is looked up only for an EHR registered on it.
        do {
            _ = try await metadata.jwksURI(ofIssuer: "https://127.0.0.1:9/idp", for: "https://ehr.example.org/fhir")
            Issue.record("a loopback issuer was used for a remote EHR")
        } catch {
            #expect(error.detail == "the issuer is on this machine (a loopback host) but the EHR is not", "\(error.detail)")
        }
    }

    @Test("a remote EHR's discovery naming endpoints on this machine (a loopback host) is refused; the same document on the EHR's own host is used",
          arguments: ["http://127.0.0.1:9", "https://localhost:9", "http://[::1]:9", "https://[0:0:0:0:0:0:0:1]:9", "https://[::ffff:127.0.0.1]:9",
                      "https://localhost.:9", "https://0.0.0.0:9", "https://127.1:9", "https://ehr.example.org"])
    func remoteDiscoveryCannotNameLoopbackEndpoints(endpointBase: String) async throws {
        let document = #"{"authorization_endpoint":"https://ehr.example.org/authorize","token_endpoint":"\#(endpointBase)/token","code_challenge_methods_supported":["S256"],"issuer":"https://ehr.example.org","jwks_uri":"https://ehr.example.org/jwks"}"#
        var router = Router()
        router.get("/fhir/.well-known/smart-configuration") { _ in .json(Array(document.utf8)) }
        let backend = try TestHTTPServer.start(router: router)
        let tls = try TLSTestServer(identity: TestCertificates.otherName)
        tls.forward(to: backend.port)
        let proxy = try ConnectProxy()
        defer { proxy.shutdown(); tls.shutdown() }
        var configuration = HTTPClient.Configuration()
        configuration.caCertificatesFile = try TestCertificates.caFile()
        configuration.proxy = proxy.url // every host name reaches 127.0.0.1
        let metadata = EHRMetadata(client: HTTPClient(configuration: configuration))
        let iss = "https://ehr.example.org:\(tls.port)/fhir"
        var refusal: SMARTError?
        do { _ = try await metadata.configuration(for: iss) } catch { refusal = error }
        await backend.shutdown(gracePeriod: .zero)
        if endpointBase == "https://ehr.example.org" {
            #expect(refusal == nil, "\(refusal?.detail ?? "")")
        } else {
            #expect(refusal?.detail == "token_endpoint is on this machine (a loopback host) but the EHR is not", "\(refusal?.detail ?? "accepted")")
        }
        #expect(tls.completedHandshakes == 1, "the document was not fetched")
    }

    let issuers = Array(#"[{"iss":"https://ehr.example/fhir/","client_id":"app","client_secret":"s3cret"}]"#.utf8)

    @Test("every configuration problem is reported at once, naming its variable")
    func allProblems() {
        do {
            _ = try BFFConfiguration.fromEnvironment(["BFF_LISTEN": "nonsense", "BFF_TOKEN_KEY": "short", "BFF_SESSION_TTL": "-5",
                                                      "BFF_LOG_LEVEL": "loud", "BFF_COOKIE_SAMESITE": "strict",
                                                      "BFF_RETURN_ORIGINS": "https://ok.example,javascript:",
                                                      "BFF_IO_THREADS": "two", "BFF_DB_POOL_SIZE": "0",
                                                      "BFF_TOKEN_KEY_FALLBACKS": "c2hvcnQ="], readFile: { _ in [] })
            Issue.record("accepted")
        } catch {
            let names = ["BFF_LISTEN", "DATABASE_URL", "BFF_ISSUERS_FILE", "BFF_TOKEN_KEY", "BFF_SESSION_TTL", "BFF_LOG_LEVEL",
                         "BFF_COOKIE_SAMESITE", "BFF_RETURN_ORIGINS", "BFF_IO_THREADS", "BFF_DB_POOL_SIZE", "BFF_TOKEN_KEY_FALLBACKS"]
            for name in names { #expect(error.problems.contains { $0.hasPrefix(name + ":") }, "\(name) not reported") }
            #expect(error.problems.count == names.count)
        }
    }

    @Test("BFF_LISTEN and BFF_PUBLIC_URL: what cannot be a bound address or a base URL is refused, naming only the variable at fault")
    func listenAndPublicURL() {
        let valid = ["DATABASE_URL": "postgresql:///bff", "BFF_ISSUERS_FILE": "/x", "BFF_TOKEN_KEY": Data(repeating: 1, count: 32).base64EncodedString()]
        func problems(_ extra: [String: String]) -> [String] {
            do { _ = try BFFConfiguration.fromEnvironment(valid.merging(extra) { $1 }, readFile: { _ in issuers }); return [] } catch { return error.problems }
        }
        // A listen address that does not parse is BFF_LISTEN's problem alone, not the public URL derived from it.
        for listen in [":19910", "::1:19910", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:+19910", "127.0.0.1:019910",
                       "my host:19910", "127.0.0.1:19910 x"] {
            let found = problems(["BFF_LISTEN": listen])
            #expect(found.count == 1 && found[0].hasPrefix("BFF_LISTEN:"), "\(listen): \(found)")
        }
        for listen in ["[::1]:19910", "[fe80::1%eth0]:19910", "bff-0.internal:19910", "0.0.0.0:19910"] {
            #expect(problems(["BFF_LISTEN": listen]) == [], "\(listen)")
        }
        for url in ["http://127.0.0.1:19910/?x=1", "http://127.0.0.1:19910#f", "http://127.0.0.1:99999"] {
            let found = problems(["BFF_PUBLIC_URL": url])
            #expect(found.count == 1 && found[0].hasPrefix("BFF_PUBLIC_URL:"), "\(url): \(found)")
        }
        #expect(problems(["BFF_PUBLIC_URL": "https://bff.example/app"]) == [])
        // A DATABASE_URL libpq cannot read is a configuration error at start (exit 78), not a
        // failed connection (exit 1, retried by systemd forever), and shows no part of it.
        for url in ["postgresql://bff:s3cretpw@[::1", "host=db password=s3cret pw", "postgresql://db/bff?nosuchoption=1",
                    "postgresql://bff:s3cret@pw@db.example/bff"] { // an '@' left unencoded in the password
            let found = problems(["DATABASE_URL": url])
            #expect(found.count == 1 && found[0].hasPrefix("DATABASE_URL: unusable connection string"), "\(url): \(found)")
            #expect(!found.joined().contains("s3cret") && !found.joined().contains(" pw"), "\(found)")
        }
        for url in ["postgresql://bff:pw@db.example:5432/bff?sslmode=verify-full", "host=/run/postgresql dbname=bff", "postgresql:///bff",
                    "postgresql://bff:s3cret%40pw@db.example/bff"] {
            #expect(problems(["DATABASE_URL": url]) == [], "\(url)")
        }
        // Return origins: a port out of range, or a list of nothing, is a malformed setting.
        for origins in ["https://app.example:99999", "https://app.example:0", ",", " , "] {
            let found = problems(["BFF_RETURN_ORIGINS": origins])
            #expect(found.count == 1 && found[0].hasPrefix("BFF_RETURN_ORIGINS:"), "\(origins): \(found)")
        }
        #expect(problems(["BFF_RETURN_ORIGINS": "https://app.example:8443, myapp:,"]) == [])
        // Values read from a file or a Kubernetes secret, trailing newline and all.
        let key = Data(repeating: 2, count: 32).base64EncodedString()
        #expect(problems(["BFF_TOKEN_KEY": Data(repeating: 1, count: 32).base64EncodedString() + "\n"]) == [])
        #expect(problems(["BFF_TOKEN_KEY_FALLBACKS": key + "\n", "BFF_SESSION_TTL": "3600\r\n", "DATABASE_URL": "postgresql:///bff\n",
                          "BFF_RETURN_ORIGINS": "https://app.example\n,myapp:\n", "BFF_LISTEN": "127.0.0.1:19910\n"]) == [])
    }

    @Test("an origin with its scheme's default port is the origin without it: in BFF_RETURN_ORIGINS and in return_to alike")
    func defaultPorts() throws {
        let c = try BFFConfiguration.fromEnvironment(["DATABASE_URL": "postgresql:///bff", "BFF_ISSUERS_FILE": "/x",
                                                      "BFF_TOKEN_KEY": Data(repeating: 1, count: 32).base64EncodedString(),
                                                      "BFF_RETURN_ORIGINS": "https://app.example:443,http://web.example:80/"],
                                                     readFile: { _ in issuers })
        #expect(c.returnOrigins == ["https://app.example", "http://web.example"])
        let policy = ReturnToPolicy(publicURL: "https://bff.example", allowed: c.returnOrigins)
        #expect(policy.resolve("https://app.example/x") == .web("https://app.example/x"))
        #expect(policy.resolve("https://app.example:443/x") == .web("https://app.example:443/x"))
        #expect(policy.resolve("https://app.example:8443/x") == nil)
    }

    @Test("a valid environment gives the contract's defaults; secrets print redacted")
    func defaults() throws {
        let key = Data((0..<32).map { UInt8($0) }).base64EncodedString()
        let c = try BFFConfiguration.fromEnvironment(["DATABASE_URL": "postgresql://u:pw@db/bff", "BFF_ISSUERS_FILE": "/x",
                                                      "BFF_TOKEN_KEY": key], readFile: { _ in issuers })
        #expect(c.listenHost == "127.0.0.1" && c.listenPort == 8080 && c.publicURL == "http://127.0.0.1:8080")
        #expect(c.returnOrigins == ["http://127.0.0.1:8080"] && c.sessionTTL == 28_800 && c.auditRetentionDays == 2190)
        #expect(c.issuers.first?.iss == "https://ehr.example/fhir")
        #expect(c.ioThreads == nil && c.databasePoolSize == 16 && c.tokenKeyFallbacks.value.isEmpty)
        let old = Data((32..<64).map { UInt8($0) }).base64EncodedString(), older = Data(repeating: 7, count: 32).base64EncodedString()
        let tuned = try BFFConfiguration.fromEnvironment(["DATABASE_URL": "postgresql:///bff", "BFF_ISSUERS_FILE": "/x", "BFF_TOKEN_KEY": key,
                                                          "BFF_IO_THREADS": "1", "BFF_DB_POOL_SIZE": "4",
                                                          "BFF_TOKEN_KEY_FALLBACKS": old + ", " + older], readFile: { _ in issuers })
        #expect(tuned.ioThreads == 1 && tuned.databasePoolSize == 4)
        #expect(tuned.tokenKeyFallbacks.value == [Array(32..<64), [UInt8](repeating: 7, count: 32)])
        #expect("\(tuned.tokenKeyFallbacks)" == "<redacted>")
        let printed = "\(c.databaseURL) \(c.tokenKey) \(c.issuers.first!.clientSecret!)"
        #expect(!printed.contains("pw") && !printed.contains("s3cret") && printed.contains("<redacted>"))
    }

    @Test("BFF_TLS_CA_FILE: a PEM bundle OpenSSL reads is kept; any other file is refused at start, by name")
    func caFile() throws {
        let key = Data(repeating: 1, count: 32).base64EncodedString()
        let ca = Array(TestCertificates.caPEM.utf8), leaf = Array(TestCertificates.localhost.certificatePEM.utf8)
        let truncated = Array(TestCertificates.caPEM.utf8.dropLast(40))
        let files: [String: [UInt8]] = ["/issuers": issuers, "/ca.pem": ca, "/bundle.pem": ca + [10] + leaf, "/empty.pem": [],
                                        "/key.pem": Array(TestCertificates.localhost.privateKeyPEM.utf8), "/truncated.pem": truncated]
        func configuration(_ caFile: String?) throws(ConfigurationError) -> BFFConfiguration {
            var env = ["DATABASE_URL": "postgresql:///bff", "BFF_ISSUERS_FILE": "/issuers", "BFF_TOKEN_KEY": key]
            env["BFF_TLS_CA_FILE"] = caFile
            return try BFFConfiguration.fromEnvironment(env, readFile: { path in
                guard let bytes = files[path] else { throw CocoaError(.fileNoSuchFile) }
                return bytes
            })
        }
        #expect(try configuration(nil).tlsCAFile == nil)
        #expect(try configuration("/ca.pem").tlsCAFile == "/ca.pem")
        #expect(try configuration("/bundle.pem").tlsCAFile == "/bundle.pem")
        let refused = ["/missing.pem": "cannot read /missing.pem",
                       "/empty.pem": "/empty.pem holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                       "/key.pem": "/key.pem holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                       "/truncated.pem": "/truncated.pem is not PEM that OpenSSL can read"]
        for (path, problem) in refused {
            #expect(throws: ConfigurationError.self) { _ = try configuration(path) }
            do { _ = try configuration(path) } catch { #expect(error.problems == ["BFF_TLS_CA_FILE: " + problem]) }
        }
    }

    @Test("BFF_ISSUERS_FILE: a member of the wrong type or unknown (misspelt), an id_token_issuer that is no https URL, or a private key no login could sign with, is refused at start, by entry")
    func issuersFileMembers() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("issuers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let p384 = directory.appendingPathComponent("p384.pem").path, p256 = directory.appendingPathComponent("p256.pem").path
        try P384PrivateKey.generate().pem.write(toFile: p384, atomically: true, encoding: .utf8)
        try TestCertificates.localhost.privateKeyPEM.write(toFile: p256, atomically: true, encoding: .utf8) // a P-256 key
        // 384 bits, but not P-384: its JWK could not say "P-384", and no EHR would verify it as such.
        let brainpool = directory.appendingPathComponent("brainpool.pem").path, rsa1024 = directory.appendingPathComponent("rsa1024.pem").path
        try Self.brainpoolP384r1.write(toFile: brainpool, atomically: true, encoding: .utf8)
        try RSAPrivateKey.generate(bits: 1024).pem.write(toFile: rsa1024, atomically: true, encoding: .utf8)
        let encrypted = Self.encryptedP384.indices.map { directory.appendingPathComponent("encrypted\($0).pem").path }
        for (path, pem) in zip(encrypted, Self.encryptedP384) { try pem.write(toFile: path, atomically: true, encoding: .utf8) }
        func problems(_ entry: String) -> [String] {
            let env = ["DATABASE_URL": "postgresql:///bff", "BFF_ISSUERS_FILE": "/issuers",
                       "BFF_TOKEN_KEY": Data(repeating: 1, count: 32).base64EncodedString()]
            do { _ = try BFFConfiguration.fromEnvironment(env, readFile: { _ in Array("[\(entry)]".utf8) }); return [] } catch { return error.problems }
        }
        let iss = #""iss":"https://ehr.example/fhir","client_id":"app""#
        #expect(problems("{\(iss),\"private_key_file\":\"\(p384)\",\"private_key_id\":\"k1\"}") == [])
        // One kid, one key: the JWKS an EHR looks keys up in must not hold two under one kid.
        let other = #""iss":"https://other.example/fhir","client_id":"app""#
        let rsa = directory.appendingPathComponent("rsa.pem").path
        try RSAPrivateKey.generate(bits: 2048).pem.write(toFile: rsa, atomically: true, encoding: .utf8)
        #expect(problems("{\(iss),\"private_key_file\":\"\(p384)\",\"private_key_id\":\"k1\"},{\(other),\"private_key_file\":\"\(p384)\",\"private_key_id\":\"k1\"}") == [])
        #expect(problems("{\(iss),\"private_key_file\":\"\(p384)\",\"private_key_id\":\"k1\"},{\(other),\"private_key_file\":\"\(rsa)\",\"private_key_id\":\"k1\"}")
            == [#"BFF_ISSUERS_FILE: entry 1: "private_key_id" k1 names another key already (each key needs a kid of its own)"#])
        // Two ways to authenticate at the token endpoint: which was meant is not for the BFF to guess.
        #expect(problems("{\(iss),\"client_secret\":\"s3cret\",\"private_key_file\":\"\(p384)\",\"private_key_id\":\"k1\"}")
            == [#"BFF_ISSUERS_FILE: entry 0: "client_secret" and "private_key_file" are two ways to authenticate; give one"#])
        #expect(problems("{\(iss),\"client_secret\":null}") == [])
        // A misspelt member would be ignored (a public client, the default scopes): it is named, with the member meant.
        #expect(problems("{\(iss),\"client_secert\":\"s3cret\"}") == [#"BFF_ISSUERS_FILE: entry 0: unknown member "client_secert"; did you mean "client_secret"?"#])
        #expect(problems("{\(iss),\"scopes\":\"launch openid patient/Patient.rs\"}") == [#"BFF_ISSUERS_FILE: entry 0: unknown member "scopes"; did you mean "scope"?"#])
        #expect(problems("{\(iss),\"notes\":\"prod tenant\"}") == [#"BFF_ISSUERS_FILE: entry 0: unknown member "notes""#])
        #expect(problems("{\(iss),\"private_key_id\":\"k1\"}")
            == [#"BFF_ISSUERS_FILE: entry 0: "private_key_id" names the key of "private_key_file", which is missing"#])
        #expect(problems("{\(iss),\"id_token_issuer\":\"https://authorization.example/tenants/t-1/\"}") == [])
        let refused = [
            "{\(iss),\"client_secret\":123}": #"entry 0: "client_secret" must be a string"#,
            "{\(iss),\"scope\":[\"openid\"]}": #"entry 0: "scope" must be a string"#,
            "{\(iss),\"id_token_issuer\":7}": #"entry 0: "id_token_issuer" must be a string"#,
            "{\(iss),\"id_token_issuer\":\"http://authorization.example/\"}": #"entry 0: "id_token_issuer" must be an https URL with no query or fragment"#,
            "{\(iss),\"id_token_issuer\":\"https://authorization.example/?tenant=1\"}": #"entry 0: "id_token_issuer" must be an https URL with no query or fragment"#,
            "{\(iss),\"id_token_issuer\":\"authorization.example\"}": #"entry 0: "id_token_issuer" must be an https URL with no query or fragment"#,
            "{\(iss),\"private_key_file\":\"\(p384)\",\"private_key_id\":7}": #"entry 0: "private_key_id" must be a string"#,
            "{\(iss),\"private_key_file\":\"\(p256)\",\"private_key_id\":\"k1\"}": "entry 0: private_key_file \(p256) holds no RSA or P-384 private key in PEM",
            "{\(iss),\"private_key_file\":\"\(brainpool)\",\"private_key_id\":\"k1\"}": "entry 0: private_key_file \(brainpool) holds no RSA or P-384 private key in PEM",
            "{\(iss),\"private_key_file\":\"\(rsa1024)\",\"private_key_id\":\"k1\"}": "entry 0: private_key_file \(rsa1024) holds an RSA key of 1024 bits (RS384 needs 2048 or more)",
            "{\(iss),\"private_key_file\":\"\(directory.path)/none.pem\",\"private_key_id\":\"k1\"}": "entry 0: cannot read private_key_file \(directory.path)/none.pem",
            // Blank is a mistake: an empty secret would make a confidential client, an empty scope a sign-in without openid.
            "{\"iss\":\"https://ehr.example/fhir\",\"client_id\":\" \"}": #"entry 0: "client_id" is required"#,
            "{\(iss),\"client_secret\":\"\"}": #"entry 0: "client_secret" is blank; leave it out, or give a value"#,
            "{\(iss),\"scope\":\" \"}": #"entry 0: "scope" is blank; leave it out, or give a value"#,
            "{\(iss),\"standalone_scope\":\"\"}": #"entry 0: "standalone_scope" is blank; leave it out, or give a value"#,
            // The same EHR spelt twice: each would name the other's issuer in discovery, and every sign-in would fail.
            "{\(iss)},{\"iss\":\"https://EHR.example:443/fhir/\",\"client_id\":\"app\"}": #"entry 1: "https://EHR.example:443/fhir/" is registered twice"#,
        ]
        // An encrypted key: OpenSSL would ask for its pass phrase on the terminal, or read it from standard input.
        for path in encrypted {
            #expect(problems("{\(iss),\"private_key_file\":\"\(path)\",\"private_key_id\":\"k1\"}")
                == ["BFF_ISSUERS_FILE: entry 0: private_key_file \(path) holds an encrypted private key (no pass phrase is asked for: store the key unencrypted, readable by smart-bff's user alone)"])
        }
        #expect(problems("{\(iss)},{\"iss\":\"https://ehr.example/fhir/r4\",\"client_id\":\"app\"}") == [], "another base on the same host")
        for (entry, problem) in refused { #expect(problems(entry) == ["BFF_ISSUERS_FILE: " + problem], "\(entry)") }
    }

    @Test("BFF_ISSUERS_FILE: an iss in cleartext http is refused at start, by entry, unless its host is loopback")
    func cleartextIssuers() {
        func problems(_ issuers: [String]) -> [String] {
            let env = ["DATABASE_URL": "postgresql:///bff", "BFF_ISSUERS_FILE": "/issuers",
                       "BFF_TOKEN_KEY": Data(repeating: 1, count: 32).base64EncodedString()]
            let file = "[" + issuers.map { #"{"iss":"\#($0)","client_id":"app"}"# }.joined(separator: ",") + "]"
            do { _ = try BFFConfiguration.fromEnvironment(env, readFile: { _ in Array(file.utf8) }); return [] } catch { return error.problems }
        }
        for iss in ["https://ehr.example.org/fhir", "http://127.0.0.1:9090/fhir", "http://127.1.2.3/fhir", "http://localhost:8080/fhir",
                    "http://[::1]:8080/fhir"] {
            #expect(problems([iss]) == [], "\(iss)")
        }
        for iss in ["http://ehr.example.org/fhir", "http://127.attacker.example/fhir", "http://127.0.0.1.nip.io/fhir", "http://127.0.0.256/fhir"] {
            let expected = "BFF_ISSUERS_FILE: entry 1: \"iss\" \(iss) is cleartext http to a host that is not loopback; use https (http only for localhost, 127.0.0.0/8 or ::1)"
            #expect(problems(["https://ehr.example.org/fhir", iss]) == [expected])
        }
        for iss in ["https://ehr.example.org/fhir#x", "https://ehr.example.org/fhir?tenant=1"] {
            #expect(problems([iss]) == [#"BFF_ISSUERS_FILE: entry 0: "iss" is a FHIR base URL, with no query or fragment"#], "\(iss)")
        }
    }

    @Test("loopback hosts: localhost, ::1, and IPv4 literals in 127.0.0.0/8; never a name that only starts like one", arguments: [
        ("127.0.0.1", true), ("127.1.2.3", true), ("127.255.255.255", true), ("localhost", true), ("LocalHost", true), ("::1", true),
        ("[::1]", true), ("127.attacker.example", false), ("127.0.0.1.nip.io", false), ("127.0.0.256", false), ("127.0.0.01", false),
        ("127.0.0", false), ("127.0.0.1.", false), ("127..0.1", false), ("128.0.0.1", false), ("0177.0.0.1", false), ("127.0.0.-1", false),
        ("127.0.0.1a", false), ("", false), ("localhost.attacker.example", false), ("::2", false),
    ])
    func loopback(host: String, loopback: Bool) {
        #expect(URLPolicy.isLoopback(host) == loopback)
        #expect(URLPolicy.isUsableEndpoint("http://\(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host):8080/fhir") == loopback)
    }

    @Test("this machine however a host writes it: loopback and unspecified addresses in every IPv4 and IPv6 spelling, and names under localhost", arguments: [
        ("127.0.0.1", true), ("localhost", true), ("[::1]", true), ("[0:0:0:0:0:0:0:1]", true), ("[0::1]", true), ("[::]", true),
        ("[::ffff:127.0.0.1]", true), ("[::ffff:7f00:1]", true), ("[::127.0.0.1]", true), ("0.0.0.0", true), ("0", true), ("127.1", true),
        ("2130706433", true), ("0x7f.1", true), ("0177.0.0.1", true), ("localhost.", true), ("app.localhost", true), ("LOCALHOST.", true),
        ("ehr.example.org", false), ("8.8.8.8", false), ("[2001:db8::1]", false), ("[::ffff:8.8.8.8]", false), ("[::1:0:0:1]", false),
        ("localhost.example.org", false), ("127.example", false), ("128.0.0.1", false), ("[fe80::1]", false),
    ])
    func thisMachine(host: String, local: Bool) {
        #expect(URLPolicy.isOnThisMachine(host) == local)
    }

    @Test("a sign-in's parameter replaces any of its name already in return_to; the rest of the URL stays as it was", arguments: [
        ("/", "/?bff_launch=L"), ("/app?x=1", "/app?x=1&bff_launch=L"), ("/app?bff_launch=old&x=1#top", "/app?x=1&bff_launch=L#top"),
        ("/app?x=1&bff%5Flaunch=old&bff_launch=older", "/app?x=1&bff_launch=L"), ("/app?bff_launch=old", "/app?bff_launch=L"),
        ("/app?bff_launcher=1", "/app?bff_launcher=1&bff_launch=L"), ("/app?#f", "/app?bff_launch=L#f"),
    ])
    func returnToParameter(returnTo: String, expected: String) {
        #expect(URLPolicy.settingQuery(returnTo, [("bff_launch", "L")]) == expected)
    }

    @Test("the session cookie: HttpOnly, SameSite, Path=/, no Domain; Secure and __Host- over https; None adds Partitioned")
    func cookie() {
        let plain = SessionCookie(secure: false, sameSiteNone: false).set("abc")
        #expect(plain == "bff_session=abc; Path=/; HttpOnly; SameSite=Lax")
        let secure = SessionCookie(secure: true, sameSiteNone: false).set("abc")
        #expect(secure.hasPrefix("__Host-bff_session=abc") && secure.contains("; Secure") && !secure.contains("Domain"))
        let embedded = SessionCookie(secure: true, sameSiteNone: true).set("abc")
        #expect(embedded.contains("SameSite=None; Partitioned") && embedded.contains("; Secure"))
    }

    @Test("return_to: allowed origins and paths pass; anything else is refused")
    func returnTo() {
        let policy = ReturnToPolicy(publicURL: "https://bff.example", allowed: ["https://bff.example", "https://app.example", "myapp:"])
        #expect(policy.resolve(nil) == .web("https://bff.example/"))
        #expect(policy.resolve("/patients?x=1") == .web("https://bff.example/patients?x=1"))
        #expect(policy.resolve("https://app.example/cb") == .web("https://app.example/cb"))
        #expect(policy.resolve("myapp://cb") == .app("myapp://cb"))
        for evil in ["https://app.example.evil/", "https://app.example@evil.example/", "//evil.example", "/\\evil", "http://app.example/",
                     "javascript:alert(1)", "otherapp://x", "https://APP.example:444/", " /x", "/x\ny"] {
            #expect(policy.resolve(evil) == nil, "\(evil)")
        }
        // A list that names only the front end's origin still lets EHR launches (no return_to) end on the BFF's.
        let frontEndOnly = ReturnToPolicy(publicURL: "https://bff.example", allowed: ["https://app.example"])
        #expect(frontEndOnly.resolve(nil) == .web("https://bff.example/"))
        #expect(frontEndOnly.resolve("https://app.example/cb") == .web("https://app.example/cb"))
        #expect(frontEndOnly.resolve("https://evil.example/") == nil)
    }

    @Test("discovery falls back to the CapabilityStatement's oauth-uris; S256 is required of smart-configuration")
    func discoveryParsing() throws {
        let capability = #"""
        {"resourceType":"CapabilityStatement","rest":[{"mode":"server","security":{"extension":[{"url":"http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris",
         "extension":[{"url":"authorize","valueUri":"https://ehr.example/auth"},{"url":"token","valueUri":"https://ehr.example/token"},{"url":"revoke","valueUri":"https://ehr.example/revoke"}]}]}}]}
        """#
        let config = try SMARTConfiguration.parseCapabilityStatement(Array(capability.utf8))
        #expect(config.authorizationEndpoint == "https://ehr.example/auth" && config.revocationEndpoint == "https://ehr.example/revoke")
        #expect(throws: SMARTError.self) {
            try SMARTConfiguration.parseSMARTConfiguration(Array(#"{"authorization_endpoint":"https://e/a","token_endpoint":"https://e/t","code_challenge_methods_supported":["plain"]}"#.utf8))
        }
        #expect(throws: SMARTError.self) {
            try SMARTConfiguration.parseSMARTConfiguration(Array(#"{"authorization_endpoint":"http://e.example/a","token_endpoint":"https://e/t","code_challenge_methods_supported":["S256"]}"#.utf8))
        }
    }

    @Test("SMART scopes: v1 and v2, with category restrictions")
    func scopes() {
        let v1 = SMARTScopes("openid patient/Observation.read launch")
        #expect(v1.allows("Observation", .read) && v1.allows("Observation", .search) && !v1.allows("Condition", .read))
        let v2 = SMARTScopes("patient/Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory patient/Patient.r")
        #expect(v2.allows("Observation", .search, query: [("category", "laboratory")]))
        #expect(!v2.allows("Observation", .search, query: [("category", "vital-signs")]) && !v2.allows("Observation", .search))
        #expect(v2.allows("Patient", .read) && !v2.allows("Patient", .search))
        #expect(SMARTScopes("user/*.cruds").allows("Encounter", .search) && !SMARTScopes("patient/*.sr").allows("Encounter", .read))
    }

    /// A throwaway brainpoolP384r1 key (`openssl ecparam -name brainpoolP384r1 -genkey`), PKCS#8.
    static let brainpoolP384r1 = """
        -----BEGIN PRIVATE KEY-----
        MIG6AgEAMBQGByqGSM49AgEGCSskAwMCCAEBCwSBnjCBmwIBAQQwCtNmN8X39MtG
        AyX9rbv5u4T3gh906/NxrYgrrgVZgPygEbesWtw06pWceFgWMGLPoWQDYgAEZppV
        6YkGyu1DV99ulgFoXqPi7HO49vTcJYaUyU7xsSwzaDUc/I3E3JV24WIv3IQBFNi9
        dx5m29ML9Ih4fbFGgvLXpAgcgKyEXeEY5F38IzUTd11Lzza+Zp/hhJzjEHSB
        -----END PRIVATE KEY-----

        """

    /// Throwaway P-384 keys under the pass phrase "secret" (`openssl genpkey … -aes256`, then
    /// `openssl ec -aes256`): PKCS#8 and traditional encryption.
    static let encryptedP384 = [
        """
        -----BEGIN ENCRYPTED PRIVATE KEY-----
        MIIBHDBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI0LIKkKuF1BkCAggA
        MAwGCCqGSIb3DQIJBQAwHQYJYIZIAWUDBAEqBBBjGZItq0LqnQRoHzc26NRnBIHA
        tQX+WtxLPfkm6bOXZGDnHCLGDM2Xq6UOlawjm7MaU8HCkRAb6v3Q+E1XudZrS5o7
        voW+LBBcXxXiEvK5HvGkQsSUKJu2m4oQf2SAHeIBQmDJCyhT1U8dbxspae901nCS
        O2ITRFqfzFVfbdbRzA3B1/4MtyZ4GHOGgAwouymFAznIpV5ELtxpvw7TgUp0e4xg
        mqBUO3H3K/bAwdNPkGO2m8cm8+GS45Khxlaiy/iXdacPZqOO/+bf6FJ6IUsfYVxQ
        -----END ENCRYPTED PRIVATE KEY-----

        """,
        """
        -----BEGIN EC PRIVATE KEY-----
        Proc-Type: 4,ENCRYPTED
        DEK-Info: AES-256-CBC,F442422595FE49115CD7507535DE1F5F

        AN7Dc6UjtA1/EbDcCIERyJogX/5hJvOqYR6mmYLkWiYq1lPgRv/ZCtYB60umfCAS
        BhrTRieYX0rjddj+SBtasQbPFnHE5/kgoG4620g8f1EUw0YCsBYou/UkA1MbJdog
        GrhwS0eU9vJTeYCSW3uO9QlDJVxiPftnF0AuqFZGOL7VHemGOGPT+q4YgNY5r9jH
        GS04iBjnpQCcdnoHhFYSbCXiuC2mDo7ukjx4ObJv+Lw=
        -----END EC PRIVATE KEY-----

        """,
    ]
}

extension ConfigurationAndPolicyTests {
    @Test("start-up warns of BFF_ variables it does not read, naming the setting meant, of an http public URL on another host, and of http return origins; the trusted CAs named as OpenSSL finds them")
    func startUpWarnings() {
        let env = ["BFF_AUDIT_RETENTION": "3650", "BFF_TOKEN_KEY_FALLBACK": "x", "BFF_SESION_TTL": "600",
                   "BFF_LISTEN": "0.0.0.0:8080", "BFF_AUDIT_RETENTION_DAYS": "3650", "HOME": "/root"]
        let lines = BFFConfiguration.warnings(env, publicURL: "https://bff.example.org")
        #expect(lines == [
            "BFF_AUDIT_RETENTION is not a smart-bff setting and is ignored; did you mean BFF_AUDIT_RETENTION_DAYS?",
            "BFF_SESION_TTL is not a smart-bff setting and is ignored; did you mean BFF_SESSION_TTL?",
            "BFF_TOKEN_KEY_FALLBACK is not a smart-bff setting and is ignored; did you mean BFF_TOKEN_KEY_FALLBACKS?",
        ])
        #expect(BFFConfiguration.warnings(["BFF_SERVICE_HOST": "10.0.0.1"], publicURL: "https://bff.example.org")
            == ["BFF_SERVICE_HOST is not a smart-bff setting and is ignored"])
        #expect(BFFConfiguration.warnings([:], publicURL: "http://bff.example.org")
            == ["BFF_PUBLIC_URL is http on bff.example.org: browsers send the session cookie in cleartext, and it cannot be Secure"])
        for local in ["http://127.0.0.1:8080", "http://localhost:8080", "https://bff.example.org"] {
            #expect(BFFConfiguration.warnings([:], publicURL: local).isEmpty, "\(local)")
        }
        #expect(BFFConfiguration.warnings(["BFF_RETURN_ORIGINS": "https://app.example, http://web.example:8000,http://localhost:3000,myapp:"],
                                          publicURL: "https://bff.example.org")
            == ["BFF_RETURN_ORIGINS lists http://web.example:8000: sign-ins return to a page sent in cleartext, which anyone on the network can alter"])
        // OpenSSL's own variables move the trusted CA certificates: the serving line names them.
        #expect(BFFConfiguration.tlsTrust(caFile: "/etc/bff/ca.pem", env: ["SSL_CERT_FILE": "/tmp/ca.pem"]) == "/etc/bff/ca.pem")
        #expect(BFFConfiguration.tlsTrust(caFile: nil, env: ["SSL_CERT_DIR": "/etc/x"]) == "SSL_CERT_DIR=/etc/x")
        #expect(BFFConfiguration.tlsTrust(caFile: nil, env: [:]) == "system CA bundle")
    }

    @Test("a CA file that holds revocation lists (not checked) or a private key (not read) is warned about at start; one of certificates only is not")
    func caFileWarnings() {
        let certificate = TestCertificates.caPEM
        let env = ["BFF_TLS_CA_FILE": "/ca.pem\n"] // from a file or a secret, its newline no part of the path
        func warnings(_ pem: String) -> [String] {
            BFFConfiguration.warnings(env, publicURL: "https://bff.example.org", readFile: { path in
                guard path == "/ca.pem" else { throw CocoaError(.fileNoSuchFile) }
                return Array(pem.utf8)
            })
        }
        #expect(warnings(certificate).isEmpty)
        let crl = warnings(certificate + "-----BEGIN X509 CRL-----\nMIIB\n-----END X509 CRL-----\n")
        #expect(crl.count == 1 && crl[0].contains("revocation"), "\(crl)")
        let key = warnings("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n" + certificate)
        #expect(key.count == 1 && key[0].contains("private key"), "\(key)")
    }
}
