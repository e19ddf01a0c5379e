#ifndef LIBCURL_BENCH_H
#define LIBCURL_BENCH_H

/* The reference client of the benchmark suite: raw libcurl multi, one thread, driven by
 * curl_multi_perform + curl_multi_poll, as a libcurl expert would write it. The Swift
 * executable measures time, CPU and RSS around lcb_run; this file only does the transfers. */

#include <stddef.h>

/* Where response bodies go. */
enum lcb_sink {
    LCB_SINK_DISCARD = 0, /* counted and dropped */
    LCB_SINK_MEMORY = 1,  /* appended to a per-transfer buffer, pre-sized from Content-Length */
    LCB_SINK_FILE = 2     /* written to `output_path` with write(2) (one transfer) */
};

typedef struct lcb_config {
    const char *url;
    long total;             /* transfers to complete (slow mode: transfers to hold open) */
    long concurrency;       /* transfers in flight at once; one easy handle each, reused */
    int http2;              /* 1: HTTP/2 over TLS (ALPN), multiplexed; 0: HTTP/1.1 */
    const char *cainfo;     /* the CA file for https (CAPATH is always NULL); NULL for http */
    int sink;               /* enum lcb_sink */
    const char *upload_path; /* non-NULL: POST this file's bytes */
    const char *output_path; /* LCB_SINK_FILE: the file the body goes to (created or truncated) */
    long long upload_size;  /* its size in bytes */
    int connection_close;   /* 1: send `Connection: close` (a new connection per request) */
    long buffer_size;       /* CURLOPT_BUFFERSIZE; 0 keeps libcurl's default (16 KiB) */
    long upload_buffer_size; /* CURLOPT_UPLOAD_BUFFERSIZE; 0 keeps libcurl's default (64 KiB) */
    int slow_open;          /* 1: open `total` transfers, wait until all receive, sample RSS, cancel */
    double deadline_seconds; /* slow mode: give up waiting after this long */
    int handoff;            /* small GETs only. 1: the floor of a library that runs no user code
                             * on the thread that drives libcurl, and nothing else: that thread
                             * hands each pass's finished transfers to a second one (a mutex and
                             * a condition variable), which delivers them and asks for the next
                             * requests through a locked list and curl_multi_wakeup. 2: the same
                             * hop through a libdispatch serial queue (dispatch_async_f), as a
                             * Swift library reaches a DispatchQueue. */
} lcb_config;

typedef struct lcb_result {
    long completed;         /* transfers that ended with CURLE_OK and a 2xx status */
    long errors;            /* transfers that failed or got another status */
    long long bytes;        /* body bytes received, or sent for an upload */
    long receiving;         /* slow mode: transfers that had received body bytes at the sample */
    long baseline_rss_kb;   /* slow mode: RSS before any transfer was created */
    long open_rss_kb;       /* slow mode: RSS once all (or `receiving`) transfers were open */
    char message[256];      /* the first error, for the report */
} lcb_result;

/* Runs the workload described by `config`; returns 0, or -1 when libcurl could not be set up
 * (the reason is in result->message). */
int lcb_run(const lcb_config *config, lcb_result *result);

/* The process's resident set size now, in KiB (from /proc/self/statm). */
long lcb_current_rss_kb(void);

#endif
