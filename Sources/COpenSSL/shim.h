// COpenSSL: the OpenSSL headers Curlew uses, plus wrappers for what Swift cannot call.
//
// Swift imports OpenSSL's plain functions directly. It cannot import function-like
// macros (the typed STACK_OF helpers, OPENSSL_free, BIO_get_mem_data), so this file
// wraps exactly those as `static inline` functions prefixed `curlew_ossl_`.
// No logic lives here: everything else is in Swift (Sources/Security, Sources/SessionCore).
#ifndef CURLEW_COPENSSL_SHIM_H
#define CURLEW_COPENSSL_SHIM_H

#include <openssl/opensslv.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>
#include <openssl/ssl.h>

// MARK: STACK_OF(X509) (typed macros over OPENSSL_sk_*)

/// Number of certificates in a `STACK_OF(X509)`; -1 for NULL.
static inline int curlew_ossl_sk_X509_num(const STACK_OF(X509) *stack) {
    return sk_X509_num(stack);
}

/// Borrowed certificate at `index` (not up-referenced); NULL when out of range.
static inline X509 *curlew_ossl_sk_X509_value(const STACK_OF(X509) *stack, int index) {
    return sk_X509_value(stack, index);
}

/// A new, empty `STACK_OF(X509)`; free it with `curlew_ossl_sk_X509_free`
/// (borrowed entries) or `curlew_ossl_sk_X509_pop_free` (owned entries).
static inline STACK_OF(X509) *curlew_ossl_sk_X509_new_null(void) {
    return sk_X509_new_null();
}

/// Appends `cert` without taking a reference; returns the new count, or 0 on failure.
static inline int curlew_ossl_sk_X509_push(STACK_OF(X509) *stack, X509 *cert) {
    return sk_X509_push(stack, cert);
}

/// Frees the stack only (its entries stay alive).
static inline void curlew_ossl_sk_X509_free(STACK_OF(X509) *stack) {
    sk_X509_free(stack);
}

/// Frees the stack and drops one reference on every entry (for `get1` stacks).
static inline void curlew_ossl_sk_X509_pop_free(STACK_OF(X509) *stack) {
    sk_X509_pop_free(stack, X509_free);
}

// MARK: Memory and BIO macros

/// `OPENSSL_free` is a macro that records the call site.
static inline void curlew_ossl_free(void *pointer) {
    OPENSSL_free(pointer);
}

/// `BIO_get_mem_data`: borrowed pointer to a memory BIO's bytes; returns their count.
static inline long curlew_ossl_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

// MARK: Composite flag macros (built from casts, so Swift does not import them)

/// `XN_FLAG_RFC2253` without `ASN1_STRFLGS_ESC_MSB`: RFC 2253 names with UTF-8 kept
/// as text rather than escaped, for human-readable subjects.
static inline unsigned long curlew_ossl_name_flags_rfc2253_utf8(void) {
    return XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB;
}

#endif
