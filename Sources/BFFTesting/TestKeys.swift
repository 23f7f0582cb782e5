/// Keys for tests, fixed so that test runs do not generate RSA keys: dozens of concurrent
/// sandbox starts each generating a 2048-bit key took the two cores for seconds, and
/// timing-sensitive tests running meanwhile stalled. Test-only; made with
/// `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`.
public enum TestKeys {
    /// The sandbox EHR's ID-token signing key in tests (`SandboxEHR.Options.signingKeyPEM`).
    public static let sandboxSigningKeyPEM = """
        -----BEGIN PRIVATE KEY-----
        MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQCsl1FZKWhcrRm3
        ChukbR7NSJxMriMbrekOURn1WqIwUgH06+JyUkg9FHCx23ZOb1w7LXWF490kux3b
        vvJMqSSW+Kqu2kSc2gwp8Aup5YYoP53/p/wT3eaKd6ruTXE5Hc8ZtsRE5PZopBKf
        7FkBqBdpgXrCemZIROTigjWgBj9i/wnR0GQMJ9bFyE9KmUsUPsQn08fi4baAJvhQ
        jDkKU69S8AHKsJw+XDnQLCg/V0CCeQvKcPscqYAP6njWdbtQ1jfFyix+Y2lNBDjK
        SkFsZSQZ1mgP1wa5azFcqIh2INfAYiMmR3xfRpzkc6Zj6HQeinnTD6/fT/7bf70x
        SnXGxVQTAgMBAAECggEATYDuIPH9UZDSOWYqn5349QqkVbLlRSrFu44j8BAxQS2y
        fz/mQpw8oGErclMxP2u2qURywBthVXtJn0KSIGbcbYdhbn/Jy/4G9FY9hp/xrOVU
        mFfhVTKSsp+mfLj+HT4LoGp4nM+M79SuIG7MUXgge1qPvAGnKND3T9hVKHVlxZgw
        tExrF51qWv+Fa9ViNs69qBhUiQgsVubDBy1U2mNbYWA+QXzYKxoTaKk8duBsTWdu
        PwSvhNE161ddKV+AsL+uy6lcH6C0/Z0l6JYsdWm+o7oBhOXm9D3WzDCu6NvDyfL8
        lk49/+5SLdgoScfdNXhVQhn3yfUo3QSMgL9yrzggEQKBgQDfqe+6YmPHp4Gz1i9G
        9mKI03N4S91v2yvwNUwuCAvrOqUY6UYz2tFhrp8hiFzHUTmDJksfjEwORzOiDwsb
        NUh0qSX2GNkhXecDTMS3+VY7qqzG9izhXms6xW657KffQYSqqbnOBe1iH3AyXwH5
        zJ2/+9hTcTsA/NJwbHChq9nC5QKBgQDFix5yD7WIWxj4gCrqfSdmrRokd79sWi4u
        Gjztu1meF88Lc32QqfJe4irPJabaJgeAGGNRPjWC7tICUVptlXzSPFrv8l0GhImd
        ecxDz97fsCK2Nm1g9QKvgWWWBHcIseJoI6ny6PE+1s7TUlV/i4Ny9e3XZOfJXQ4w
        auhgpsTzlwKBgQCve2ouRyHYNNFrosGHIKqghZ6UJJnBOCmaFocFmqSXU3TTPbsp
        1iXvSQ1rRszcSRshjfrk7rOBhFW7cagaGc0WUtwI4OgC6OTmTuYNHiCNQdS7acw+
        qlDhVKQSVd5EKOiI6g9w2G+uS9JAgxBOyD6AsXzBwxYzKSmGsV4RSn7ZDQKBgQCa
        5rIjAsp4d+amxenhIe6Jhude/T9veW+I2y43xJdLbqP9+LvXekwBtxuWf5HMsdFj
        0rvecweG+jpXcu+TyoqsWIN+b/AeMkOu5lkUO6YqhXVSqG8wfi9y6+Z6slmcydAd
        lQmo3px9h/d6oa9FamLS/KFaK1fOAFgmA07gqyT5VQKBgBEbDM4IOUA6EJnKfHnw
        6IPuAPsCvtQ/te60Jn9oIcN32siffUsTwTgmpHHbu3nb7DfcgotQMxhnr191uU16
        OatpvI7YeQHhTGaSatqTuID3W4RQTdussIg9qXF20cfNswVC3zki0xvceS90SK3g
        tYMAyeFNZ6Yi03bCwDJSXFdX
        -----END PRIVATE KEY-----
        """
}
