#ifndef SMART_BFF_CLIBSSL_SHIM_H
#define SMART_BFF_CLIBSSL_SHIM_H
/* libssl, for the tests' TLS server (BFFTesting.TLSTestServer). The product's TLS is
   libcurl's, over the same OpenSSL. */
#include <openssl/ssl.h>
#include <openssl/pem.h>
#include <openssl/err.h>
#endif
