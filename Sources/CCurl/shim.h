// Curlew's libcurl shim: only what Swift cannot call directly.
// curl_easy_setopt, curl_easy_getinfo, curl_multi_setopt and curl_share_setopt are
// variadic, so each argument type gets a typed static inline wrapper. No logic lives here.
#ifndef CURLEW_CCURL_SHIM_H
#define CURLEW_CCURL_SHIM_H

#include <curl/curl.h>
#include <sys/syscall.h>
#include <unistd.h>

// MARK: curl_easy_setopt

static inline CURLcode curlew_easy_setopt_long(CURL *_Nonnull handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode curlew_easy_setopt_off_t(CURL *_Nonnull handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode curlew_easy_setopt_string(CURL *_Nonnull handle, CURLoption option, const char *_Nullable value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode curlew_easy_setopt_pointer(CURL *_Nonnull handle, CURLoption option, void *_Nullable value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode curlew_easy_setopt_slist(CURL *_Nonnull handle, CURLoption option, struct curl_slist *_Nullable value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode curlew_easy_setopt_write_function(CURL *_Nonnull handle, CURLoption option, curl_write_callback _Nullable value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode curlew_easy_setopt_read_function(CURL *_Nonnull handle, curl_read_callback _Nullable value) {
    return curl_easy_setopt(handle, CURLOPT_READFUNCTION, value);
}
static inline CURLcode curlew_easy_setopt_seek_function(CURL *_Nonnull handle, curl_seek_callback _Nullable value) {
    return curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, value);
}
static inline CURLcode curlew_easy_setopt_xferinfo_function(CURL *_Nonnull handle, curl_xferinfo_callback _Nullable value) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}
static inline CURLcode curlew_easy_setopt_ssl_ctx_function(CURL *_Nonnull handle, curl_ssl_ctx_callback _Nullable value) {
    return curl_easy_setopt(handle, CURLOPT_SSL_CTX_FUNCTION, value);
}
static inline CURLcode curlew_easy_setopt_prereq_function(CURL *_Nonnull handle, curl_prereq_callback _Nullable value) {
    return curl_easy_setopt(handle, CURLOPT_PREREQFUNCTION, value);
}
static inline CURLcode curlew_easy_setopt_sockopt_function(CURL *_Nonnull handle, curl_sockopt_callback _Nullable value) {
    return curl_easy_setopt(handle, CURLOPT_SOCKOPTFUNCTION, value);
}
static inline CURLcode curlew_easy_setopt_resolver_start_function(CURL *_Nonnull handle, curl_resolver_start_callback _Nullable value) {
    return curl_easy_setopt(handle, CURLOPT_RESOLVER_START_FUNCTION, value);
}

// MARK: curl_easy_getinfo

static inline CURLcode curlew_easy_getinfo_long(CURL *_Nonnull handle, CURLINFO info, long *_Nonnull value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode curlew_easy_getinfo_off_t(CURL *_Nonnull handle, CURLINFO info, curl_off_t *_Nonnull value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode curlew_easy_getinfo_string(CURL *_Nonnull handle, CURLINFO info, char *_Nullable *_Nonnull value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode curlew_easy_getinfo_pointer(CURL *_Nonnull handle, CURLINFO info, void *_Nullable *_Nonnull value) {
    return curl_easy_getinfo(handle, info, value);
}

// MARK: curl_multi_setopt / curl_share_setopt

static inline CURLMcode curlew_multi_setopt_long(CURLM *_Nonnull handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}
static inline CURLSHcode curlew_share_setopt_long(CURLSH *_Nonnull handle, CURLSHoption option, long value) {
    return curl_share_setopt(handle, option, value);
}
static inline CURLSHcode curlew_share_setopt_pointer(CURLSH *_Nonnull handle, CURLSHoption option, void *_Nullable value) {
    return curl_share_setopt(handle, option, value);
}
static inline CURLSHcode curlew_share_setopt_lock_function(CURLSH *_Nonnull handle, curl_lock_function _Nullable value) {
    return curl_share_setopt(handle, CURLSHOPT_LOCKFUNC, value);
}
static inline CURLSHcode curlew_share_setopt_unlock_function(CURLSH *_Nonnull handle, curl_unlock_function _Nullable value) {
    return curl_share_setopt(handle, CURLSHOPT_UNLOCKFUNC, value);
}

// MARK: macros that alias enum values (Swift does not import them)

static inline CURLversion curlew_version_now(void) { return CURLVERSION_NOW; }

// MARK: mremap (variadic, and declared by glibc only under _GNU_SOURCE)

// Grows a large response body's anonymous mapping (ResponseBody), moving it if it must: the
// kernel moves page tables, not bytes. The system call itself, with MREMAP_MAYMOVE (1 in
// <linux/mman.h>). NULL when it fails.
static inline void *_Nullable curlew_mremap_maymove(void *_Nonnull address, size_t oldSize, size_t newSize) {
    long moved = syscall(SYS_mremap, address, oldSize, newSize, 1L /* MREMAP_MAYMOVE */);
    return moved == -1 ? (void *)0 : (void *)moved;
}

// MARK: renameat2 (declared by glibc only under _GNU_SOURCE)

// Moves a finished download to its destination without replacing anything there: the system
// call with RENAME_NOREPLACE (1 in <linux/fs.h>), so the check that the destination is free
// and the move are one step. Paths are from the working directory (AT_FDCWD, -100: <fcntl.h>
// is not included, or its struct stat would belong to this module). 0, or -1 with errno
// (EEXIST when taken; EXDEV across file systems; EINVAL or ENOSYS where the file system or
// kernel has no such flag).
static inline int curlew_rename_noreplace(const char *_Nonnull from, const char *_Nonnull to) {
    return (int)syscall(SYS_renameat2, -100 /* AT_FDCWD */, from, -100, to, 1U /* RENAME_NOREPLACE */);
}

#endif
