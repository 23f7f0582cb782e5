#ifndef SMART_BFF_CCURL_SHIM_H
#define SMART_BFF_CCURL_SHIM_H
#include <curl/curl.h>
#include <sys/socket.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic; Swift cannot call them. These typed
   wrappers are the only way our Swift code sets options and reads information. */
static inline CURLcode bff_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode bff_curl_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode bff_curl_setopt_callback(CURL *h, CURLoption o, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, o, f); }
/* CURLOPT_PREREQFUNCTION's callback has its own signature; it tells us the connection is ready (starts the read timeout). */
static inline CURLcode bff_curl_setopt_prereq(CURL *h, int (*f)(void *, char *, char *, int, int)) { return curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, f); }
static inline CURLcode bff_curl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode bff_curl_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
/* CURLOPT_OPENSOCKETFUNCTION: libcurl's own socket() call leaves out SOCK_CLOEXEC, so a
   program started while a connection is open (posix_spawn, fork) would inherit it and keep
   the connection open after libcurl closes its descriptor. */
static curl_socket_t bff_curl_open_cloexec_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
    (void)clientp; (void)purpose;
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}
static inline CURLcode bff_curl_setopt_cloexec_sockets(CURL *h) { return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, bff_curl_open_cloexec_socket); }

static inline CURLMcode bff_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode bff_curl_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
/* The multi-socket interface: libcurl says which descriptors to watch and when to call back. */
static inline CURLMcode bff_curl_multi_setopt_socketfunction(CURLM *m, int (*f)(CURL *, curl_socket_t, int, void *, void *)) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, f); }
static inline CURLMcode bff_curl_multi_setopt_timerfunction(CURLM *m, int (*f)(CURLM *, long, void *)) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, f); }

/* CURLMsg.data is a union; this reads a finished transfer's handle and result. */
static inline int bff_curl_msg_done(CURLMsg *m, CURL **easy, CURLcode *result) {
    if (m->msg != CURLMSG_DONE) return 0;
    *easy = m->easy_handle;
    *result = m->data.result;
    return 1;
}

/* Macros Swift does not import. */
static const size_t bff_curl_writefunc_pause = CURL_WRITEFUNC_PAUSE;
static const int bff_curlpause_cont = CURLPAUSE_CONT;
static const curl_socket_t bff_curl_socket_timeout = CURL_SOCKET_TIMEOUT;
#endif
