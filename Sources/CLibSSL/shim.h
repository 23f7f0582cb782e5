#ifndef SMART_BFF_CLIBSSL_SHIM_H
#define SMART_BFF_CLIBSSL_SHIM_H
/* libssl: TLS for the outbound client (HTTPClient/TLS) and for the tests' TLS server
   (BFFTesting.TLSTestServer). */
#include <openssl/ssl.h>
#include <openssl/pem.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <errno.h>
#include <string.h>
#include <stdint.h>
#include <sys/socket.h>

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

/* --- The client (HTTPClient/TLS) --- */

/* Macros in OpenSSL's headers, which Swift cannot call. */
static inline int bff_ssl_ctx_set_min_tls12(SSL_CTX *ctx) { return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION); }
/* At most TLS 1.2 (test servers that offer only TLS 1.2 cipher suites). */
static inline int bff_ssl_ctx_set_max_tls12(SSL_CTX *ctx) { return (int)SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION); }
/* SSL_write may write part of a buffer, and be called again with the rest from another
   address (Swift arrays move). */
static inline void bff_ssl_ctx_set_write_modes(SSL_CTX *ctx) {
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}
/* Read ahead: one recv takes what the socket has (several records), instead of two per
   record (its header, then its body). SSL_has_pending tells when bytes wait in OpenSSL. */
static inline void bff_ssl_ctx_set_read_ahead(SSL_CTX *ctx) { SSL_CTX_set_read_ahead(ctx, 1); }
/* No TLS 1.2 renegotiation (a write could then have to wait for reads). SSL_OP_* are macros. */
static inline void bff_ssl_ctx_refuse_renegotiation(SSL_CTX *ctx) { SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION); }
/* SNI: the host name in the ClientHello. */
static inline int bff_ssl_set_server_name(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }

/* A socket BIO that sends with MSG_NOSIGNAL: OpenSSL's own socket BIO uses write(), which
   raises SIGPIPE when the peer has gone and would end a process that did not ignore it.
   The descriptor is the BIO's data; the BIO never closes it (the connection does). */
static int bff_nosigpipe_write(BIO *bio, const char *data, int length) {
    int fd = (int)(intptr_t)BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    ssize_t n = send(fd, data, (size_t)length, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_write(bio);
    return (int)n;
}

static int bff_nosigpipe_read(BIO *bio, char *data, int length) {
    int fd = (int)(intptr_t)BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    ssize_t n = recv(fd, data, (size_t)length, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_read(bio);
    return (int)n;
}

static int bff_nosigpipe_puts(BIO *bio, const char *text) { return bff_nosigpipe_write(bio, text, (int)strlen(text)); }

static long bff_nosigpipe_ctrl(BIO *bio, int command, long number, void *pointer) {
    (void)bio; (void)number; (void)pointer;
    return command == BIO_CTRL_FLUSH ? 1 : 0;
}

static int bff_nosigpipe_create(BIO *bio) { BIO_set_init(bio, 1); return 1; }

/* A new method table (made once by the caller and kept for the process). */
static inline BIO_METHOD *bff_nosigpipe_method_new(void) {
    BIO_METHOD *method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "smart-bff socket");
    if (!method) return NULL;
    BIO_meth_set_write(method, bff_nosigpipe_write);
    BIO_meth_set_read(method, bff_nosigpipe_read);
    BIO_meth_set_puts(method, bff_nosigpipe_puts);
    BIO_meth_set_ctrl(method, bff_nosigpipe_ctrl);
    BIO_meth_set_create(method, bff_nosigpipe_create);
    return method;
}

/* A BIO of `method` over `fd`, or NULL. */
static inline BIO *bff_nosigpipe_bio_new(BIO_METHOD *method, int fd) {
    BIO *bio = BIO_new(method);
    if (bio) BIO_set_data(bio, (void *)(intptr_t)fd);
    return bio;
}
#endif
