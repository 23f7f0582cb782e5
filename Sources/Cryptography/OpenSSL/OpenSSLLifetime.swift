internal import COpenSSL

/// How long OpenSSL's global state lives: until the process is gone.
public enum OpenSSLLifetime {
    /// Tells OpenSSL not to free its global state from an `atexit` handler. At exit, other
    /// threads (event loops, Dispatch workers) may still be inside OpenSSL, and the locks it
    /// frees crash them: test processes died with SIGSEGV in `pthread_rwlock_wrlock` while
    /// their own exit handler ran, after every test had passed; a `serve` exiting with
    /// requests still in flight could do the same. Takes effect only as the process's first
    /// OpenSSL call (before it, OpenSSL registers its handler at its first use); harmless
    /// later.
    public static func keepThroughExit() {
        _ = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil)
    }
}
