/* Raw libcurl multi client: the reference every other client is compared with.
 *
 * What a libcurl expert does for throughput, and what this file does:
 * - one multi handle driven by curl_multi_perform + curl_multi_poll on one thread
 *   (faster than socket_action on a busy loopback server, see shared/research/perf.md);
 * - one easy handle per concurrent transfer, set up once and re-added for every request
 *   (keeps libcurl's per-handle state, TLS session and connection reuse);
 * - a share handle for DNS and TLS sessions (one thread: no lock callbacks needed);
 * - CAINFO = the test CA with CAPATH = NULL, so the parsed CA store is cached (7.87+);
 * - bodies to a discarding callback, a buffer pre-sized from Content-Length, or a file with
 *   write(2) straight from curl's buffer (no stdio copy: the chunks are 512 KiB);
 * - a large receive buffer only for the bulk download (the upload keeps libcurl's 64 KiB,
 *   measured no slower here than 512 KiB and cheaper in CPU). */

#include "libcurl_bench.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct transfer {
    CURL *easy;
    char *body;
    size_t length;
    size_t capacity;
    long long received;
    FILE *upload;
    long long sent;
    int output; /* LCB_SINK_FILE: the open file, else -1 */
    int receiving;
    struct run *run;
} transfer;

typedef struct run {
    const lcb_config *config;
    lcb_result *result;
    long receiving;
} run;

long lcb_current_rss_kb(void) {
    FILE *file = fopen("/proc/self/statm", "r");
    if (!file) return -1;
    long pages = 0, resident = 0;
    int fields = fscanf(file, "%ld %ld", &pages, &resident);
    fclose(file);
    if (fields != 2) return -1;
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void note_error(lcb_result *result, const char *text) {
    if (result->message[0] == '\0') snprintf(result->message, sizeof result->message, "%s", text);
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t n = size * count;
    t->received += (long long)n;
    if (!t->receiving && n > 0) {
        t->receiving = 1;
        t->run->receiving += 1;
    }
    if (t->run->config->sink == LCB_SINK_FILE) {
        size_t done = 0;
        while (done < n) {
            ssize_t written = write(t->output, data + done, n - done);
            if (written < 0 && errno == EINTR) continue;
            if (written <= 0) return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
            done += (size_t)written;
        }
        return n;
    }
    if (t->run->config->sink != LCB_SINK_MEMORY) return n;
    if (t->length + n > t->capacity) {
        /* Pre-size from Content-Length on the first chunk; double when it is unknown or wrong. */
        curl_off_t expected = -1;
        curl_easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &expected);
        size_t wanted = t->capacity ? t->capacity * 2 : 16384;
        if (expected > 0 && (size_t)expected >= t->length + n && t->capacity < (size_t)expected) wanted = (size_t)expected;
        while (wanted < t->length + n) wanted *= 2;
        char *grown = realloc(t->body, wanted);
        if (!grown) return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
        t->body = grown;
        t->capacity = wanted;
    }
    memcpy(t->body + t->length, data, n);
    t->length += n;
    return n;
}

static size_t on_upload(char *buffer, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t n = fread(buffer, 1, size * count, t->upload);
    if (n == 0 && ferror(t->upload)) return CURL_READFUNC_ABORT;
    t->sent += (long long)n;
    return n;
}

static int configure(transfer *t, CURLSH *share, struct curl_slist *headers) {
    const lcb_config *c = t->run->config;
    CURL *e = t->easy;
    curl_easy_setopt(e, CURLOPT_URL, c->url);
    curl_easy_setopt(e, CURLOPT_SHARE, share);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, c->http2 ? (long)CURL_HTTP_VERSION_2TLS : (long)CURL_HTTP_VERSION_1_1);
    if (c->http2) curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    if (c->cainfo) {
        curl_easy_setopt(e, CURLOPT_CAINFO, c->cainfo);
        curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    }
    if (c->buffer_size > 0) curl_easy_setopt(e, CURLOPT_BUFFERSIZE, c->buffer_size);
    if (c->upload_buffer_size > 0) curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, c->upload_buffer_size);
    if (headers) curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    if (c->upload_path) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(e, CURLOPT_READDATA, t);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->upload_size);
    }
    return 0;
}

/* Prepares a handle for its next request: rewinds the upload, empties the body buffer
 * (keeping its memory), opens the output file. */
static int rearm(transfer *t) {
    t->length = 0;
    t->receiving = 0;
    if (t->run->config->sink == LCB_SINK_FILE) {
        if (t->output >= 0) close(t->output);
        t->output = open(t->run->config->output_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (t->output < 0) return -1;
    }
    if (t->run->config->upload_path) {
        if (t->upload) fclose(t->upload);
        t->upload = fopen(t->run->config->upload_path, "rb");
        if (!t->upload) return -1;
    }
    return 0;
}

static void finish(transfer *t, CURLcode code, lcb_result *result) {
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    int closed = 1;
    if (t->output >= 0) {
        /* The file is complete when the transfer is: its close is part of the work measured. */
        closed = close(t->output) == 0;
        t->output = -1;
    }
    if (!closed) {
        result->errors += 1;
        note_error(result, "closing the output file failed");
    } else if (code == CURLE_OK && status >= 200 && status < 300) {
        result->completed += 1;
    } else {
        result->errors += 1;
        char text[200];
        snprintf(text, sizeof text, "curl %d (%s), HTTP %ld", (int)code, curl_easy_strerror(code), status);
        note_error(result, text);
    }
    result->bytes += t->run->config->upload_path ? t->sent : t->received;
    t->received = 0;
    t->sent = 0;
}

/* The next transfer the multi handle reports done, taken out of it and counted (`finish`);
 * NULL when no other is done. */
static transfer *next_finished(CURLM *multi, lcb_result *result) {
    CURLMsg *message;
    int queued;
    while ((message = curl_multi_info_read(multi, &queued))) {
        if (message->msg != CURLMSG_DONE) continue;
        transfer *t = NULL;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        CURLcode code = message->data.result;
        curl_multi_remove_handle(multi, t->easy);
        finish(t, code, result);
        return t;
    }
    return NULL;
}

/* How many easy handles a run uses: one per transfer in flight (slow mode: one per transfer). */
static long slot_count(const lcb_config *config) {
    long slots = config->slow_open ? config->total : config->concurrency;
    if (slots < 1) slots = 1;
    if (!config->slow_open && slots > config->total) slots = config->total > 0 ? config->total : 1;
    return slots;
}

/* libcurl, a multi handle for `slots` connections and a DNS + TLS-session share that one
 * thread uses (no lock callbacks); -1, with the reason in `result`, when any of it fails. */
static int open_multi(const lcb_config *config, lcb_result *result, long slots, CURLM **multi, CURLSH **share) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        note_error(result, "curl_global_init failed");
        return -1;
    }
    *multi = curl_multi_init();
    *share = curl_share_init();
    if (!*multi || !*share) {
        note_error(result, "curl_multi_init or curl_share_init failed");
        return -1;
    }
    curl_share_setopt(*share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(*share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    /* HTTP/1.1: exactly one connection per in-flight transfer; HTTP/2 multiplexes on one. */
    curl_multi_setopt(*multi, CURLMOPT_MAX_HOST_CONNECTIONS, config->slow_open ? 0L : slots);
    curl_multi_setopt(*multi, CURLMOPT_MAXCONNECTS, slots);
    return 0;
}

static int drive_handoff(const lcb_config *config, lcb_result *result, run *state, long slots, CURLM *multi,
                         CURLSH *share);

int lcb_run(const lcb_config *config, lcb_result *result) {
    memset(result, 0, sizeof *result);
    if (config->handoff && (config->slow_open || config->upload_path || config->sink != LCB_SINK_MEMORY)) {
        note_error(result, "the hand-off client runs the small GETs only");
        return -1;
    }
    run state = {.config = config, .result = result, .receiving = 0};
    long slots = slot_count(config);
    CURLM *multi = NULL;
    CURLSH *share = NULL;
    if (open_multi(config, result, slots, &multi, &share) != 0) return -1;
    if (config->handoff) return drive_handoff(config, result, &state, slots, multi, share);

    struct curl_slist *headers = NULL;
    if (config->connection_close) headers = curl_slist_append(headers, "Connection: close");
    /* A fast local sink: no 100-continue round trip before a large body. */
    if (config->upload_path) headers = curl_slist_append(headers, "Expect:");

    if (config->slow_open) result->baseline_rss_kb = lcb_current_rss_kb();

    transfer *transfers = calloc((size_t)slots, sizeof *transfers);
    if (!transfers) {
        note_error(result, "out of memory");
        return -1;
    }
    for (long i = 0; i < slots; i++) transfers[i].output = -1;
    long started = 0;
    int failed_setup = 0;
    for (long i = 0; i < slots && started < config->total; i++) {
        transfer *t = &transfers[i];
        t->run = &state;
        t->easy = curl_easy_init();
        if (!t->easy || configure(t, share, headers) != 0 || rearm(t) != 0) {
            note_error(result, "could not set up an easy handle (or open the upload or output file)");
            failed_setup = 1;
            break;
        }
        curl_multi_add_handle(multi, t->easy);
        started += 1;
    }

    double start = now_seconds();
    int running = 1;
    int sampled = 0;
    while (!failed_setup) {
        curl_multi_perform(multi, &running);
        transfer *t;
        while ((t = next_finished(multi, result))) {
            if (started < config->total && !config->slow_open) {
                if (rearm(t) == 0) {
                    curl_multi_add_handle(multi, t->easy);
                    started += 1;
                    running += 1;
                } else {
                    note_error(result, "could not reopen the upload or output file");
                }
            }
        }
        if (config->slow_open) {
            int all_open = state.receiving >= config->total;
            if (all_open || now_seconds() - start > config->deadline_seconds || running == 0) {
                result->open_rss_kb = lcb_current_rss_kb();
                result->receiving = state.receiving;
                sampled = 1;
                break;
            }
        } else if (running == 0 && started >= config->total) {
            break;
        }
        curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    (void)sampled;

    /* Cancel whatever is still open (slow mode) and free everything. */
    for (long i = 0; i < slots; i++) {
        transfer *t = &transfers[i];
        if (t->easy) {
            curl_multi_remove_handle(multi, t->easy);
            curl_easy_cleanup(t->easy);
        }
        if (t->upload) fclose(t->upload);
        if (t->output >= 0) close(t->output);
        free(t->body);
    }
    free(transfers);
    curl_slist_free_all(headers);
    curl_multi_cleanup(multi);
    curl_share_cleanup(share);
    return failed_setup ? -1 : 0;
}

/* --- The one-serial-context floor (lcb_config.handoff) ---------------------------------- */

/* What the two threads share. Each transfer is in at most one place at a time: in flight on
 * the driver, in `done` (or being delivered), or in `starts`; so each list holds at most
 * `slots` entries and the transfer's fields belong to whichever thread holds it. */
typedef struct handoff {
    pthread_mutex_t lock;
    pthread_cond_t ready;  /* `done` has transfers, or `stop` */
    transfer **done;       /* finished by the driver, not yet delivered */
    long done_count;
    transfer **starts;     /* delivered and asked for again, not yet added by the driver */
    long start_count;
    transfer **delivering; /* the delivering thread's own: the batch it works on */
    int stop;
    CURLM *multi;          /* only for curl_multi_wakeup off the driver thread */
    long slots;
    long total;
    long started;          /* the delivering side's after the first `slots` */
    unsigned long checksum; /* the delivered bodies' bytes */
    long work_after_ns;     /* LCB_WORK_AFTER_NS: busy time per delivered transfer (experiment) */
    long work_before_ns;    /* LCB_WORK_BEFORE_NS: the same, before the next request is asked */
} handoff;

/* Delivers `count` finished transfers as completion handlers would receive them (the body;
 * nothing more is read) and keeps, at the front of `items`, those asked for again: returns how
 * many. The delivering side only. */
static long deliver(handoff *h, transfer **items, long count) {
    long again = 0;
    for (long i = 0; i < count; i++) {
        transfer *t = items[i];
        h->checksum += t->length;
        if (h->started < h->total) {
            h->started += 1;
            items[again++] = t;
        }
    }
    return again;
}

/* Hands `count` transfers to the driver to start again, and wakes it: one wakeup per batch, as
 * a library coalesces them. */
static void ask_again(handoff *h, transfer **items, long count) {
    if (count == 0) return;
    pthread_mutex_lock(&h->lock);
    memcpy(h->starts + h->start_count, items, (size_t)count * sizeof *items);
    h->start_count += count;
    pthread_mutex_unlock(&h->lock);
    curl_multi_wakeup(h->multi);
}

/* The delivering thread (handoff == 1): takes each batch the driver hands over, delivers it
 * and asks for the next request of each finished slot. */
static void *handoff_deliver(void *argument) {
    handoff *h = argument;
    transfer **batch = h->delivering;
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (h->done_count == 0 && !h->stop) pthread_cond_wait(&h->ready, &h->lock);
        if (h->done_count == 0) break; /* stopped and drained */
        long count = h->done_count;
        memcpy(batch, h->done, (size_t)count * sizeof *batch);
        h->done_count = 0;
        pthread_mutex_unlock(&h->lock);

        if (h->work_before_ns > 0) {
            /* An experiment (LCB_WORK_BEFORE_NS): work a library does between a response's
             * arrival and the next request (notices, the serializer, the handler itself). */
            double until = now_seconds() + (double)h->work_before_ns * count / 1e9;
            while (now_seconds() < until) {}
        }
        ask_again(h, batch, deliver(h, batch, count));
        if (h->work_after_ns > 0) {
            /* An experiment (LCB_WORK_AFTER_NS): work a library does after the handler
             * (notifications, releases), as busy time on this thread. */
            double until = now_seconds() + (double)h->work_after_ns * count / 1e9;
            while (now_seconds() < until) {}
        }
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

/* handoff == 2: the same hop through a libdispatch serial queue, as Swift code sends work to
 * a DispatchQueue (the functions declared here: this file does not build against dispatch's
 * headers; the Swift runtime the benchmark links brings the library). */
typedef struct dispatch_queue_s *lcb_dispatch_queue;
extern lcb_dispatch_queue dispatch_queue_create(const char *label, void *attributes);
extern void dispatch_async_f(lcb_dispatch_queue queue, void *context, void (*work)(void *));
extern void dispatch_sync_f(lcb_dispatch_queue queue, void *context, void (*work)(void *));
extern void dispatch_release(void *object);

/* One pass's finished transfers, carried to the queue in one block. */
typedef struct handoff_batch {
    handoff *h;
    long count;
    transfer *items[];
} handoff_batch;

/* On the serial queue (handoff == 2): one batch, as handoff_deliver takes it. */
static void handoff_deliver_batch(void *context) {
    handoff_batch *b = context;
    ask_again(b->h, b->items, deliver(b->h, b->items, b->count));
    free(b);
}

static void handoff_nothing(void *context) { (void)context; }

/* lcb_run's small GETs with `config->handoff` (see the header): `multi` and `share`, set up by
 * lcb_run, are used by the driving thread alone and freed here. */
static int drive_handoff(const lcb_config *config, lcb_result *result, run *state, long slots, CURLM *multi,
                         CURLSH *share) {
    struct curl_slist *headers = NULL;
    if (config->connection_close) headers = curl_slist_append(headers, "Connection: close");

    handoff h = {.multi = multi, .slots = slots, .total = config->total};
    const char *work_after = getenv("LCB_WORK_AFTER_NS");
    h.work_after_ns = work_after ? atol(work_after) : 0;
    const char *work_before = getenv("LCB_WORK_BEFORE_NS");
    h.work_before_ns = work_before ? atol(work_before) : 0;
    transfer *transfers = calloc((size_t)slots, sizeof *transfers);
    transfer **lists = calloc((size_t)slots * 4, sizeof *lists);
    if (!transfers || !lists) {
        note_error(result, "out of memory");
        free(transfers);
        free(lists);
        curl_slist_free_all(headers);
        curl_multi_cleanup(multi);
        curl_share_cleanup(share);
        return -1;
    }
    h.done = lists;
    h.starts = lists + slots;
    transfer **batch = lists + 2 * slots; /* the driver's own: one pass's finished transfers */
    h.delivering = lists + 3 * slots;
    pthread_mutex_init(&h.lock, NULL);
    pthread_cond_init(&h.ready, NULL);

    int failed_setup = 0;
    for (long i = 0; i < slots; i++) {
        transfer *t = &transfers[i];
        t->output = -1;
        t->run = state;
        t->easy = curl_easy_init();
        if (!t->easy || configure(t, share, headers) != 0) {
            note_error(result, "could not set up an easy handle");
            failed_setup = 1;
            break;
        }
        h.starts[h.start_count++] = t; /* the first requests, as a caller's resume() would */
    }
    h.started = h.start_count;

    int dispatched = config->handoff == 2;
    lcb_dispatch_queue queue = dispatched ? dispatch_queue_create("lcb.completions", NULL) : NULL;
    pthread_t deliverer;
    if (dispatched && !queue) {
        note_error(result, "could not create the dispatch queue");
        failed_setup = 1;
    } else if (!failed_setup && !dispatched && pthread_create(&deliverer, NULL, handoff_deliver, &h) != 0) {
        note_error(result, "could not start the delivering thread");
        failed_setup = 1;
    }
    long finished = 0;
    int running = 0;
    while (!failed_setup && finished < config->total) {
        pthread_mutex_lock(&h.lock);
        long count = h.start_count;
        memcpy(batch, h.starts, (size_t)count * sizeof *batch);
        h.start_count = 0;
        pthread_mutex_unlock(&h.lock);
        for (long i = 0; i < count; i++) {
            rearm(batch[i]);
            curl_multi_add_handle(multi, batch[i]->easy);
        }
        curl_multi_perform(multi, &running);
        long ended = 0;
        transfer *t;
        while ((t = next_finished(multi, result))) batch[ended++] = t;
        finished += ended;
        if (ended > 0 && dispatched) {
            handoff_batch *b = malloc(sizeof *b + (size_t)ended * sizeof *b->items);
            if (!b) {
                note_error(result, "out of memory");
                break;
            }
            b->h = &h;
            b->count = ended;
            memcpy(b->items, batch, (size_t)ended * sizeof *batch);
            dispatch_async_f(queue, b, handoff_deliver_batch);
        } else if (ended > 0) {
            pthread_mutex_lock(&h.lock);
            memcpy(h.done + h.done_count, batch, (size_t)ended * sizeof *batch);
            h.done_count += ended;
            pthread_cond_signal(&h.ready);
            pthread_mutex_unlock(&h.lock);
        }
        if (finished >= config->total) break;
        curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    if (dispatched && queue) {
        dispatch_sync_f(queue, NULL, handoff_nothing); /* every batch delivered */
        dispatch_release(queue);
    } else if (!failed_setup) {
        pthread_mutex_lock(&h.lock);
        h.stop = 1;
        pthread_cond_signal(&h.ready);
        pthread_mutex_unlock(&h.lock);
        pthread_join(deliverer, NULL);
    }

    for (long i = 0; i < slots; i++) {
        transfer *t = &transfers[i];
        if (t->easy) {
            curl_multi_remove_handle(multi, t->easy);
            curl_easy_cleanup(t->easy);
        }
        free(t->body);
    }
    free(transfers);
    free(lists);
    pthread_mutex_destroy(&h.lock);
    pthread_cond_destroy(&h.ready);
    curl_slist_free_all(headers);
    curl_multi_cleanup(multi);
    curl_share_cleanup(share);
    return failed_setup ? -1 : 0;
}
