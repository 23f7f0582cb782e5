// Made by scripts/make-test-certificates.sh; regenerate with it rather than editing.

/// TLS certificates and keys for tests (EC P-256): a throwaway CA and server certificates it
/// signed, for `TLSTestServer`. Test-only; the private keys protect nothing.
public enum TestCertificates {
    /// A certificate and its private key, PEM.
    public struct Identity: Sendable {
        public let certificatePEM: String
        public let privateKeyPEM: String
    }

    /// The CA that signed `localhost`, `otherName`, `expired` and `subjectOnly`.
    public static let caPEM = """
        -----BEGIN CERTIFICATE-----
        MIIBazCCARGgAwIBAgIBATAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFzbWFydC1i
        ZmYgdGVzdCBDQTAgFw0yMDAxMDEwMDAwMDBaGA8yMTI2MDEwMTAwMDAwMFowHDEa
        MBgGA1UEAwwRc21hcnQtYmZmIHRlc3QgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMB
        BwNCAARldmUP9iW4Dv0M2r/i2XFv1Gyua7dPinWJ3RMeJy7v4I/BEDxDY7lftWD+
        NMCqbWLDWdo0xMrdD3CO5PmLa789o0IwQDAPBgNVHRMBAf8EBTADAQH/MA4GA1Ud
        DwEB/wQEAwIBBjAdBgNVHQ4EFgQU8lZU6j7qNJEelEWhKvXaaEop4VYwCgYIKoZI
        zj0EAwIDSAAwRQIhANc1UpQOdQvHxhqzUpYk5HwhGIEYhg8FhFKaFOcZaGO/AiBc
        1wJKpfQcGnxrFbQM4LJ/2n6Bp+eIB4b496Ol97H7gw==
        -----END CERTIFICATE-----
        """

    /// For `localhost` and `127.0.0.1`, signed by the CA, valid 2020–2126.
    public static let localhost = Identity(certificatePEM: """
        -----BEGIN CERTIFICATE-----
        MIIBoDCCAUWgAwIBAgIBAjAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFzbWFydC1i
        ZmYgdGVzdCBDQTAgFw0yMDAxMDEwMDAwMDBaGA8yMTI2MDEwMTAwMDAwMFowFDES
        MBAGA1UEAwwJbG9jYWxob3N0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE1TXg
        F1X3PLHwbRvBdZatlkm8dPmQLuFL6Hcu3sdVPfqkUBCJQDHChDrPQWD3zyJ09jhv
        Gd05/tw55ntgYqJYaKN+MHwwGgYDVR0RBBMwEYIJbG9jYWxob3N0hwR/AAABMAkG
        A1UdEwQCMAAwEwYDVR0lBAwwCgYIKwYBBQUHAwEwHQYDVR0OBBYEFEAtAoRQMv9U
        u8M01Ypdh0Do7q6OMB8GA1UdIwQYMBaAFPJWVOo+6jSRHpRFoSr12mhKKeFWMAoG
        CCqGSM49BAMCA0kAMEYCIQD3SjbDqbGjC3W0LkdXub+v4htj/EK6827VgKq4o9xn
        KQIhAMI35CyasMnQ1Rsc7eAtLYSP7x6QQ7GWhdyDybjeHmyc
        -----END CERTIFICATE-----
        """, privateKeyPEM: """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgYrpT7hFep5uvkotN
        zex0iwwCKLwVeAG/WccWvH0IJTqhRANCAATVNeAXVfc8sfBtG8F1lq2WSbx0+ZAu
        4Uvody7ex1U9+qRQEIlAMcKEOs9BYPfPInT2OG8Z3Tn+3Dnme2Biolho
        -----END PRIVATE KEY-----
        """)

    /// For `ehr.example.org` only, signed by the CA: right chain, wrong name for localhost.
    public static let otherName = Identity(certificatePEM: """
        -----BEGIN CERTIFICATE-----
        MIIBpDCCAUugAwIBAgIBAzAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFzbWFydC1i
        ZmYgdGVzdCBDQTAgFw0yMDAxMDEwMDAwMDBaGA8yMTI2MDEwMTAwMDAwMFowGjEY
        MBYGA1UEAwwPZWhyLmV4YW1wbGUub3JnMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcD
        QgAE6Mr7krDl1VmWCLk6CxY/WMieTY2LvKRdO0L6W03NUNarzzJ4hf1SbfX0rKGF
        QIX4U/8qTbM0Hk7E5gE+zZOv7aN+MHwwGgYDVR0RBBMwEYIPZWhyLmV4YW1wbGUu
        b3JnMAkGA1UdEwQCMAAwEwYDVR0lBAwwCgYIKwYBBQUHAwEwHQYDVR0OBBYEFFey
        HoKuPX3AY85c9Atr21LO2lylMB8GA1UdIwQYMBaAFPJWVOo+6jSRHpRFoSr12mhK
        KeFWMAoGCCqGSM49BAMCA0cAMEQCICzaveImRwO9cNAD3YYAC7vdYzj9ZX4QXcXy
        xEcuQ6QnAiBygqe4weMXu+KCZ/cryTXTlvEUw7+Uf3/7HWXMxravjQ==
        -----END CERTIFICATE-----
        """, privateKeyPEM: """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgQdtA4veuEpULvRWm
        xtUXzRhcySNGJJYUlI1sokDYNVyhRANCAAToyvuSsOXVWZYIuToLFj9YyJ5NjYu8
        pF07QvpbTc1Q1qvPMniF/VJt9fSsoYVAhfhT/ypNszQeTsTmAT7Nk6/t
        -----END PRIVATE KEY-----
        """)

    /// For `localhost`, signed by the CA, valid only in the year 2000.
    public static let expired = Identity(certificatePEM: """
        -----BEGIN CERTIFICATE-----
        MIIBnDCCAUOgAwIBAgIBBDAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFzbWFydC1i
        ZmYgdGVzdCBDQTAeFw0wMDAxMDEwMDAwMDBaFw0wMTAxMDEwMDAwMDBaMBQxEjAQ
        BgNVBAMMCWxvY2FsaG9zdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABEU2Wx3Y
        ozOOk474i8QyNTZ7+KweaZj1mqCJsgwyboJUx+vydnNe+dRbArvOVmpuZsr8lVKT
        gVFzqiD2F9tYHdGjfjB8MBoGA1UdEQQTMBGCCWxvY2FsaG9zdIcEfwAAATAJBgNV
        HRMEAjAAMBMGA1UdJQQMMAoGCCsGAQUFBwMBMB0GA1UdDgQWBBSptb7DG8sUxluf
        mAwpZRjqKW4eSzAfBgNVHSMEGDAWgBTyVlTqPuo0kR6URaEq9dpoSinhVjAKBggq
        hkjOPQQDAgNHADBEAiAPDpFsW7VZrhpkI47lVO7MlS9DibWapj/HhvELiq0PmwIg
        f/6WU9z7N0SuUBJKfNCNHnINvLvI1qqvgRHNqNCJbj0=
        -----END CERTIFICATE-----
        """, privateKeyPEM: """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgr6arimAg1S0yzGId
        WysWIUrFY466dGcdFb4nDejj09uhRANCAARFNlsd2KMzjpOO+IvEMjU2e/isHmmY
        9ZqgibIMMm6CVMfr8nZzXvnUWwK7zlZqbmbK/JVSk4FRc6og9hfbWB3R
        -----END PRIVATE KEY-----
        """)

    /// For `localhost`, self-signed: no CA vouches for it.
    public static let selfSigned = Identity(certificatePEM: """
        -----BEGIN CERTIFICATE-----
        MIIBdTCCARygAwIBAgIBBTAKBggqhkjOPQQDAjAUMRIwEAYDVQQDDAlsb2NhbGhv
        c3QwIBcNMjAwMTAxMDAwMDAwWhgPMjEyNjAxMDEwMDAwMDBaMBQxEjAQBgNVBAMM
        CWxvY2FsaG9zdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABJG+YiA0vPgWe1Ug
        OpyRrInH2VOBna+m4LB3SAljEdAxCTZq5b1uOXK1sEijmS4d3PFcTBD2DYuqAiLO
        jNwsiKGjXTBbMBoGA1UdEQQTMBGCCWxvY2FsaG9zdIcEfwAAATAJBgNVHRMEAjAA
        MBMGA1UdJQQMMAoGCCsGAQUFBwMBMB0GA1UdDgQWBBRO0m4R65LFVZVhBA7M50BH
        57sMATAKBggqhkjOPQQDAgNHADBEAiA13XpIGTZ9Y0hNC/DemZTJTWCVka1tmei0
        4HSPwwqsCwIgFBqA4jAPhutpygfXJgXjLfnMlGAsRQA/LuWWgTCkfys=
        -----END CERTIFICATE-----
        """, privateKeyPEM: """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg/Qeqv37UkjyDzNHe
        cK43k+R8cAyawbSV1RHNGBJ63f+hRANCAASRvmIgNLz4FntVIDqckayJx9lTgZ2v
        puCwd0gJYxHQMQk2auW9bjlytbBIo5kuHdzxXEwQ9g2LqgIizozcLIih
        -----END PRIVATE KEY-----
        """)

    /// CN=localhost with no subjectAltName, signed by the CA: names are checked against SANs
    /// only (RFC 9525 §6), so it is for no host.
    public static let subjectOnly = Identity(certificatePEM: """
        -----BEGIN CERTIFICATE-----
        MIIBhDCCASmgAwIBAgIBBjAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFzbWFydC1i
        ZmYgdGVzdCBDQTAgFw0yMDAxMDEwMDAwMDBaGA8yMTI2MDEwMTAwMDAwMFowFDES
        MBAGA1UEAwwJbG9jYWxob3N0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEh4NC
        N6anwS1DHW0VXhp/7CzdaxdDO3L7Rg2Tirmi+jqcL+pcTr38kfALQSsmcaEGiSeo
        z7CNijhfsXxyxHaYq6NiMGAwCQYDVR0TBAIwADATBgNVHSUEDDAKBggrBgEFBQcD
        ATAdBgNVHQ4EFgQUZMxxedKEg1ZlFl2skT4DILXdI/AwHwYDVR0jBBgwFoAU8lZU
        6j7qNJEelEWhKvXaaEop4VYwCgYIKoZIzj0EAwIDSQAwRgIhAPAYyzzKJ+34ksjc
        ycNeCn2UdTYod8pqaG7Z5okIwArRAiEApU4LT+EQHEP9QHlXmKCb7wq60rBWHLVA
        qgsiB9E8Mm4=
        -----END CERTIFICATE-----
        """, privateKeyPEM: """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgCFM2Vjj2cTu/Msi4
        rpdV32YGragAswLH74iRDWH9VUChRANCAASHg0I3pqfBLUMdbRVeGn/sLN1rF0M7
        cvtGDZOKuaL6Opwv6lxOvfyR8AtBKyZxoQaJJ6jPsI2KOF+xfHLEdpir
        -----END PRIVATE KEY-----
        """)
}
