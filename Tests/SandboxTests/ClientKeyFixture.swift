/// The `rs-app` client key of the sandbox tests: fixed (made with `openssl genpkey -algorithm
/// RSA`), because generating it at run time held every test behind a once-lock.
enum ClientKeyFixture {
    static let rsaPEM = """
        -----BEGIN PRIVATE KEY-----
        MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQDSx1LuslupCovV
        vNNj9NXWkN0qKfSXQ1mNIM4uY0S00vd3PGWuJCh7OCqnZKvfxRZo+JLOJpFDKYGb
        tyT3PmcULtiJKtFxoTfR2b4FjbhOypbggS8JIT2R5d7Gu33tCXqH/MAQ0accfwf+
        5+xkM5FxrIrwNHE4xjPXmzduLkKCsPWfNv5syNiaPdfbBF+9oYEj+PjRRoecOxHa
        iHN+AZC6eb5AowDgkJPALbbVRZDN+6KZJA9ZIoWtVnKiIUzK68W7vjxQWiy8d9wR
        Azz/myEhhRrXr+y4zioaUrrmzb3m7Ive0oK4Sj/IMt0+NseUn1EMrS882Mxq5b+p
        LzV1CazzAgMBAAECggEAYrmy2hPXg/tpGPFLUCfHGyuaM9wX8Nu+b7B8clTTwyCH
        gaVb+O99uI1LyUEJkhPF1eAMHxwIcR1ZVD65xUbI0DbK/KB+HouFUjj7XK2PNPSG
        K9zGU6/qn1I8gPgj2OlWJ6jWq2oPrHTBoX8vBZXz23sWTsE5gP6xHJ1anrRzObPf
        suR3v7bToYDrJj9LgRJGPjwbyrfiDoJv7TQ4qaQpzy1wmb8Dr1L8ZClg4lU4hzsX
        cIA1v/gS4fhgVF86qLGhsMG71qcspHSsHVW4RMttE5m4jaLMk5f7N1IWfB/HAECC
        1RzQjdYWYu9UIqRHHaiymUYVdTSYEjGAOG6E3YfgxQKBgQD+LgwTTUxncBFuFQGE
        DdQoWI+ht3qAvUSGwQsNPf2R39pCu+R16l0oMO6hd5NCTHONQlluyGtnJ9Ss6/1t
        2H0gif7dKE3J4LspIbvCzEhQ0QzDXwi+GS0RjVkvD4impxZP+Ks/tUY8ombFAW4i
        cHmWIoCK4OKgyzUrEJUaNSo3jwKBgQDUSbcaioRw7bB2gcBGpQiCpKdmZbH72dWN
        TvRaoTur/wC9+NP2xUIBJ/YDwlS5Ros1loKFHAX6A5jYhhg0EBCg5WkeD88UFrNO
        z+xbVcgUWomtvQ1s3Au8xhdIerFVx8DTQnbkYkuz6W6/aEBGr6bH53IeRVoqWX5p
        45UUTEWiXQKBgHMHrclScyBgtFKoSP5VL81uftoF6fe3L/r4BCNjCY1pzCHlXHgM
        r0oQEv6Z2dfoN2cXPtgG9axCd1omlpOOpNoD+YZmxgV1od30eT+oKZYBdZA5QwCc
        7iuCV3kXw5UACvX4KK/1PqsUKARCKHCHjE7ooFm5enagYBh0MbYhl1B7AoGBAKdL
        nHfXF35jYoBRynQh1K4YEjA5DmV6ire8tAbEL2FhKXWMpYZAd76vfkoCGICWHljR
        zvQVXIRl10szidllm6UghZGCRd//77i5VPu5g16+5uc7KFxUoQ9YULr2rc/7BnO2
        WjmrWRtkZ7mB772E6Xt6Ys2GPANJ2bya9D41yV6lAoGBAOkhEOpVqyqrcz6t6VTP
        8Zka87V2FkH5Vqol+Fna5ArA+ZuU46WoWQ5COlj29v2hpIKXzatYWpWhcuh7TX/h
        zxJR8MEYYBTEquPegxyjvM90LUVW6A4HnFtHJLpDl4Ig/rp6/be7x5X/HrazkU7i
        Qm0LltlZ8awMPVh+IT1rhYj/
        -----END PRIVATE KEY-----
        """
}
