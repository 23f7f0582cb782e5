#ifndef SMART_BFF_CLIBSSL_SHIM_H
#define SMART_BFF_CLIBSSL_SHIM_H
/* libssl, for the tests' TLS server (BFFTesting.TLSTestServer). The product's TLS is
   libcurl's, over the same OpenSSL. */
#include <openssl/ssl.h>
#include <openssl/pem.h>
#include <openssl/err.h>

/* ALPN as an HTTP/2-capable server answers it: h2 when the client offers it, else
   http/1.1. In C: OpenSSL keeps the pointer it is given into this static list. */
static const unsigned char bff_alpn_server_protocols[] = { 2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };

static inline int bff_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                  const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl; (void)arg;
    if (SSL_select_next_proto((unsigned char **)out, outlen, bff_alpn_server_protocols,
                              sizeof bff_alpn_server_protocols, in, inlen) != OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    return SSL_TLSEXT_ERR_OK;
}

static inline void bff_ssl_ctx_offer_h2(SSL_CTX *ctx) { SSL_CTX_set_alpn_select_cb(ctx, bff_alpn_select, NULL); }
#endif
