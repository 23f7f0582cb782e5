/// Keys of the sandbox tests: `rs-app`'s client key and one nobody registered: fixed (made with `openssl genpkey -algorithm
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
    /// A key no client registered (an assertion signed with it must be refused).
    static let otherRSAPEM = """
        -----BEGIN PRIVATE KEY-----
        MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDEa/BuiBLdbVXG
        pmdACbWNhcgg6QFG1l542wYmOLH69gfNh6176CN/dhFirYkAs5Ns61ZrgomSqDK2
        Lug3/t9rN0N2lYtuO0BNzcQlXgqCNzvdIuGK3pG6Hh5mPAzZU9M75glZRiGjDsiX
        2WggNGZvFd+PAxnUpjBG8Y1krqbrsWzZ/9ZVXOZWmAx5+yPyzK5lJLPYz5P3zRgF
        b9MLKocYfPc4RSOcb0NXfAFFLBpwW0lcyfL8rJmUQ5fz1weIb83BqBqLqZCF9JOS
        S0dJk0iAZmEYJaVdwwtOrT2d6BON6VNpkjBJayRIhm6L0YLedktG0Ra/q+xq9SCs
        VAqPShbBAgMBAAECggEADafED9MgSJ+SGoeKtGODE9iB+MkUyyQabkQqfHFtl4O6
        OCTfaov8HR+MBt8HSsgGjvMaJMru8zCupzFsoylHcVs8B/Gj6gvEJS88cdfvWsJ/
        RBjpiC9//xSaoBiQUMg97l3y4W95kC32GRnGs5J2WpuxLpk/Fvm0xSyEMW8zmz1b
        z403pAud5mROUlmjqriNu8fuJf80chd5vwQ/ngMEDMXkwvyntKTRAUqN0l9TLsf7
        LrxP7ADi11KiZUbXn5eDe0sdv0ewDWVgFbMupZ+zQ+kB6fzg2E97pcHf2IdBo2Yz
        Hwa5c1jAjgh5wxMn8Zo57IgDqknCeVQ/OqCwC4g5PwKBgQDgrSjK60ldUSCE4yIJ
        o4NAvOHuhFCfvWV+VbsB1knNTr9kBA7NryOaBqCzB93Pa8Bt8CUeQYBfZFVz0R4u
        D9fO6VPD5qZlDlB9kGAcWXK7P557xA6tFeF5S+hjD7BrTrGMRTFALL8mtEjuuuAs
        b8OlukMrVSC1M+xtyOGDG7ozAwKBgQDfzlmCvfWSVEu/XYn2K5Obnl85dIWPLUVE
        ++gGUTnyujBpP3a8ClpH0KIeeYymF5PmuYI/f3cr6cgLBlfk4X9j+/JmtfAYGyQ7
        cWOfsB6N0W4InVK8F+DmAdJoanny/uuYgy9miF8+bBethZ5WkVZZBDWU6GO14CMH
        XTqycPjB6wKBgFHqEBNbkVX6fBa3EPPer73sn5rsltCGpvhWnWXgEOxPp6v5ZsRK
        9Hn1rKVZWt+C85ehlIbhbsJYvGcLeStmD1Ka8zVbZJM3ktUUzFXJrvDiExAgvRES
        BzDIIiPr1nBpMoZnu7sgFVkxJd4UOCM7ZGOJ829bDB/EnJCySrYYZ9ytAoGBANLj
        JCE4UgASglXOFEPsh+hpcR04mOlzJQR9wgLB4zK/EwL5lC5YKv3kr/67VjbjnLAa
        OYsP1wGABsmsroGzolBahe0Wnyh32spQbCl60S+dGmvvopguf/L74IIXYtYAM4vA
        gZfCBM1TGXSepba4uH6kosCvwdUNYLR9uuON5DkFAoGABRNw0H5fW0v2qM7waPHr
        RAwkUkb8gq45OOfiJfc2I2yDRs9Q7DI9+6Y3NUEKybXuU6VBH6Sd4ZJOLoDHgFAw
        L6kbQq9WfK3gXR81DAZml9nodlHgxQNNLiJCmFLu/HSS3XMg9qGLKSdeE4Y/Ojis
        r/9uLeEc7zgsgWcM3/zsC2E=
        -----END PRIVATE KEY-----
        """
}
