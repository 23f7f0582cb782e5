#ifndef SMART_BFF_COPENSSL_SHIM_H
#define SMART_BFF_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/bn.h>
#include <openssl/rand.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/ec.h>
#include <openssl/rsa.h>
#include <openssl/crypto.h>

/* OPENSSL_free is a macro; Swift needs a function. */
static inline void bff_openssl_free(void *p) { OPENSSL_free(p); }
#endif
