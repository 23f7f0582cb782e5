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

#include <openssl/bio.h>
#include <openssl/x509.h>

/* BIO_get_mem_data is a macro over BIO_ctrl; Swift needs a function. */
static inline long bff_bio_get_mem_data(BIO *bio, char **out) { return BIO_get_mem_data(bio, out); }

/* EVP_PKEY_PUBLIC_KEY is a macro built from other macros, which Swift does not import. */
static const int bff_evp_pkey_public_key = EVP_PKEY_PUBLIC_KEY;

/* OSSL_PARAM_BLD keeps the key name pointer until OSSL_PARAM_BLD_to_param; a Swift string
   argument is only valid during the call, so the names must have static storage. */
static const char *const bff_param_rsa_n = "n";
static const char *const bff_param_rsa_e = "e";

/* OPENSSL_free is a macro; Swift needs a function. */
static inline void bff_openssl_free(void *p) { OPENSSL_free(p); }
#endif
