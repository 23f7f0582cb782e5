// Made by scripts/make-test-certificates.sh; regenerate with it rather than editing.

/// TLS certificates and keys for tests (EC P-256): a throwaway CA and server certificates it
/// signed, for `TLSTestServer`. Test-only; the private keys protect nothing.
public enum TestCertificates {
    /// A certificate and its private key, PEM.
    public struct Identity: Sendable {
        public let certificatePEM: String
        public let privateKeyPEM: String
    }

    /// The CA that signed `localhost`, `otherName` and `expired`.
    public static let caPEM = """
        -----BEGIN CERTIFICATE-----
        MIIBajCCARGgAwIBAgIBATAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFzbWFydC1i
        ZmYgdGVzdCBDQTAgFw0yMDAxMDEwMDAwMDBaGA8yMTI2MDEwMTAwMDAwMFowHDEa
        MBgGA1UEAwwRc21hcnQtYmZmIHRlc3QgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMB
        BwNCAASSM7ohn/jcE+1AHeHDHxZ38yb1dzpOy1MbHcuEKkYdcmBcU9chvuaIC1BB
        UpL7GDYW7yUD/0xR3DZFRmnWLjjbo0IwQDAPBgNVHRMBAf8EBTADAQH/MA4GA1Ud
        DwEB/wQEAwIBBjAdBgNVHQ4EFgQUfrL8FA2m41S2CDyuLbryaR+hHRQwCgYIKoZI
        zj0EAwIDRwAwRAIgNA+jbTcgVpgYjfiIpwM8KURuSM+/N5/iUc3SfQCM3eYCIAFK
        73SG25rP/dzjTQGc+8uwoWk5cQCLT2QtWPcTnEJK
        -----END CERTIFICATE-----
        """

    /// For `localhost` and `127.0.0.1`, signed by the CA, valid 2020–2126.
    public static let localhost = Identity(certificatePEM: """
        -----BEGIN CERTIFICATE-----
        MIIBnzCCAUWgAwIBAgIBAjAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFzbWFydC1i
        ZmYgdGVzdCBDQTAgFw0yMDAxMDEwMDAwMDBaGA8yMTI2MDEwMTAwMDAwMFowFDES
        MBAGA1UEAwwJbG9jYWxob3N0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEaOvo
        eBUeabouqoAC3qj1OYuKHuWh/NBacOJY+s7Psl9xB29Y2MTXevpZWTPKZ7DZBFh1
        d+joCAo+YMal7pT+BKN+MHwwGgYDVR0RBBMwEYIJbG9jYWxob3N0hwR/AAABMAkG
        A1UdEwQCMAAwEwYDVR0lBAwwCgYIKwYBBQUHAwEwHQYDVR0OBBYEFNzGgI2UHUp5
        VytWgvyILpNKSkqvMB8GA1UdIwQYMBaAFH6y/BQNpuNUtgg8ri268mkfoR0UMAoG
        CCqGSM49BAMCA0gAMEUCIHLW3xLo0kMiDymDf6B+D04Mh2B/O7DnSgPen6BQByv+
        AiEApa+/qgXKytEbMj8jjfHo9RjVjMNemD1gMmoufpKiZZs=
        -----END CERTIFICATE-----
        """, privateKeyPEM: """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQguPCdzBxm5q3SYlsq
        h3/fBqOXC0Mc95kUeq+3iVKzKlmhRANCAARo6+h4FR5pui6qgALeqPU5i4oe5aH8
        0Fpw4lj6zs+yX3EHb1jYxNd6+llZM8pnsNkEWHV36OgICj5gxqXulP4E
        -----END PRIVATE KEY-----
        """)

    /// For `ehr.example.org` only, signed by the CA: right chain, wrong name for localhost.
    public static let otherName = Identity(certificatePEM: """
        -----BEGIN CERTIFICATE-----
        MIIBpDCCAUugAwIBAgIBAzAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFzbWFydC1i
        ZmYgdGVzdCBDQTAgFw0yMDAxMDEwMDAwMDBaGA8yMTI2MDEwMTAwMDAwMFowGjEY
        MBYGA1UEAwwPZWhyLmV4YW1wbGUub3JnMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcD
        QgAE8C6qV2ILs/brgE2Uae8FUfHk008E81kqLh6NLtWjqVBNpOYB9yo7MwmPA6wF
        XRoL8Mi9M/b8uaHoKLTubzHXsqN+MHwwGgYDVR0RBBMwEYIPZWhyLmV4YW1wbGUu
        b3JnMAkGA1UdEwQCMAAwEwYDVR0lBAwwCgYIKwYBBQUHAwEwHQYDVR0OBBYEFCI8
        rrhjqmYorWjytWrbhoqcfOlqMB8GA1UdIwQYMBaAFH6y/BQNpuNUtgg8ri268mkf
        oR0UMAoGCCqGSM49BAMCA0cAMEQCICJ5AahfqchDnlCd1OFJSKqDDVv2+HHjq5VQ
        kwoFhpDBAiA7pHPzfv3iH3b/omnJoTVfXg034FtueqSbj5TjsIpYOA==
        -----END CERTIFICATE-----
        """, privateKeyPEM: """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgJC3rBINGElBy2dOQ
        EWQ8HKmYj9wf/LQAyqeTViipoeWhRANCAATwLqpXYguz9uuATZRp7wVR8eTTTwTz
        WSouHo0u1aOpUE2k5gH3KjszCY8DrAVdGgvwyL0z9vy5oegotO5vMdey
        -----END PRIVATE KEY-----
        """)

    /// For `localhost`, signed by the CA, valid only in the year 2000.
    public static let expired = Identity(certificatePEM: """
        -----BEGIN CERTIFICATE-----
        MIIBnTCCAUOgAwIBAgIBBDAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFzbWFydC1i
        ZmYgdGVzdCBDQTAeFw0wMDAxMDEwMDAwMDBaFw0wMTAxMDEwMDAwMDBaMBQxEjAQ
        BgNVBAMMCWxvY2FsaG9zdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABI6prn3I
        iL8D5N9NagvAS0y+tpw42kViJL0nTvEYQDuj9hHUiJ9q4jP26auzWO0p478sxcZG
        gLD1/KgGuOdddnOjfjB8MBoGA1UdEQQTMBGCCWxvY2FsaG9zdIcEfwAAATAJBgNV
        HRMEAjAAMBMGA1UdJQQMMAoGCCsGAQUFBwMBMB0GA1UdDgQWBBQ7P84abL7JRnuC
        fGU26MQft8DCYzAfBgNVHSMEGDAWgBR+svwUDabjVLYIPK4tuvJpH6EdFDAKBggq
        hkjOPQQDAgNIADBFAiAVRKxzAouk+Zicq9i6y7AiDTftQKEH7bm5Oojyu5YCowIh
        AKnmBogeCHPnLFpvf3lJouXXAQWRQOC0gJsaE31XirPh
        -----END CERTIFICATE-----
        """, privateKeyPEM: """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgc3Il2mzL7Qc/r9u3
        H14QmowzK3U7eD+rg23UuiMzVzOhRANCAASOqa59yIi/A+TfTWoLwEtMvracONpF
        YiS9J07xGEA7o/YR1IifauIz9umrs1jtKeO/LMXGRoCw9fyoBrjnXXZz
        -----END PRIVATE KEY-----
        """)

    /// For `localhost`, self-signed: no CA vouches for it.
    public static let selfSigned = Identity(certificatePEM: """
        -----BEGIN CERTIFICATE-----
        MIIBdjCCARygAwIBAgIBBTAKBggqhkjOPQQDAjAUMRIwEAYDVQQDDAlsb2NhbGhv
        c3QwIBcNMjAwMTAxMDAwMDAwWhgPMjEyNjAxMDEwMDAwMDBaMBQxEjAQBgNVBAMM
        CWxvY2FsaG9zdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABIeezccj+osxGIJO
        WZ4F6i+btUFffaWez9CnEceQUG1947Rj00+5V/Q7Vt6HHJi21/Xn/QGzGETx6Kh/
        qWzO53qjXTBbMBoGA1UdEQQTMBGCCWxvY2FsaG9zdIcEfwAAATAJBgNVHRMEAjAA
        MBMGA1UdJQQMMAoGCCsGAQUFBwMBMB0GA1UdDgQWBBTxLT4ay0Q4MLK8+Kpaya/W
        k0fMeTAKBggqhkjOPQQDAgNIADBFAiEA73iOxoHRaVdA6QNdwnJLEQSbPEvxvC6m
        4JNElQ6eRpICIGCRuCTzo2JpPevHQIdU5GoekNNFeOPJkMbVAnJVawAM
        -----END CERTIFICATE-----
        """, privateKeyPEM: """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgxcKvSna5eNYp+Qxt
        toFA8tTKYAsWkkjoHIJVT2XUp+GhRANCAASHns3HI/qLMRiCTlmeBeovm7VBX32l
        ns/QpxHHkFBtfeO0Y9NPuVf0O1behxyYttf15/0BsxhE8eiof6lszud6
        -----END PRIVATE KEY-----
        """)
}
