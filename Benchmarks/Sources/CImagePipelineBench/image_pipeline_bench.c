/* The C baseline of the image pipeline workload: see image_pipeline_bench.h.
 *
 * As a libcurl + libjpeg-turbo user writes it for throughput:
 * - one multi handle driven by curl_multi_perform + curl_multi_poll on the calling thread,
 *   `concurrency` easy handles set up once and re-added for each URL (connection reuse);
 * - each body appended to a buffer sized from Content-Length, handed over (no copy) to the
 *   decoding pool when its transfer ends, so the next transfer starts at once;
 * - libjpeg's own reduced-scale decoding (scale_num / scale_denom) straight to RGBA
 *   (JCS_EXT_RGBA), rows written into the final buffer;
 * - body buffers recycled: the decoding thread hands a buffer back for the next transfer
 *   instead of freeing it (a fresh 250 KB buffer per image costs page faults and page
 *   clearing in the kernel, measured at a tenth of the run's CPU). */

#include "image_pipeline_bench.h"

#include <curl/curl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h>

/* ---- the decoding pool ---- */

typedef struct job {
    unsigned char *body;
    size_t length, capacity;
    struct job *next;
} job;

/* The most decoded bodies' buffers kept for reuse. */
#define SPARE_BUFFERS 16

typedef struct image {
    unsigned char *pixels;
    long width, height;
} image;

typedef struct pool {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    job *head, *tail;
    int closed;
    long max_pixel_size;
    /* buffers for the next bodies, under `lock` */
    unsigned char *spare[SPARE_BUFFERS];
    size_t spare_capacity[SPARE_BUFFERS];
    int spare_count;
    /* results, under `lock` */
    image *images;
    long image_count;
    long decoded, errors;
    long long pixels;
    long last_width, last_height;
} pool;

typedef struct jpeg_failure {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
} jpeg_failure;

static void jpeg_fail(j_common_ptr info) {
    jpeg_failure *failure = (jpeg_failure *)info->err;
    longjmp(failure->jump, 1);
}

static void jpeg_silent(j_common_ptr info, int level) { (void)info; (void)level; }

/* Box-filter (area average) RGBA downscale; JPEGs are opaque, so no premultiplication. */
static unsigned char *area_resample(const unsigned char *source, long width, long height, long new_width,
                                    long new_height) {
    unsigned char *target = malloc((size_t)(new_width * new_height * 4));
    if (!target) return NULL;
    double x_ratio = (double)width / (double)new_width, y_ratio = (double)height / (double)new_height;
    for (long y = 0; y < new_height; y++) {
        double y0 = y * y_ratio, y1 = (y + 1) * y_ratio;
        for (long x = 0; x < new_width; x++) {
            double x0 = x * x_ratio, x1 = (x + 1) * x_ratio;
            double sum[4] = {0, 0, 0, 0}, area = 0;
            for (long sy = (long)y0; sy < height && sy < y1; sy++) {
                double wy = (sy + 1 < y1 ? sy + 1 : y1) - (sy > y0 ? sy : y0);
                for (long sx = (long)x0; sx < width && sx < x1; sx++) {
                    double wx = (sx + 1 < x1 ? sx + 1 : x1) - (sx > x0 ? sx : x0);
                    const unsigned char *p = source + (sy * width + sx) * 4;
                    double w = wx * wy;
                    for (int c = 0; c < 4; c++) sum[c] += p[c] * w;
                    area += w;
                }
            }
            unsigned char *out = target + (y * new_width + x) * 4;
            for (int c = 0; c < 4; c++) out[c] = (unsigned char)(sum[c] / area + 0.5);
        }
    }
    return target;
}

/* Decodes one JPEG; returns 0 and fills `out`, or -1. */
static int decode(const unsigned char *body, size_t length, long max_pixel_size, image *out) {
    struct jpeg_decompress_struct info;
    jpeg_failure failure;
    unsigned char *volatile pixels = NULL;
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = jpeg_fail;
    failure.manager.emit_message = jpeg_silent;
    if (setjmp(failure.jump)) {
        jpeg_destroy_decompress(&info);
        free(pixels);
        return -1;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, body, (unsigned long)length);
    if (jpeg_read_header(&info, TRUE) != JPEG_HEADER_OK) longjmp(failure.jump, 1);
    long longest = info.image_width > info.image_height ? info.image_width : info.image_height;
    unsigned denominator = 1;
    if (max_pixel_size > 0) {
        /* The largest reduction whose long side is still at least max_pixel_size. */
        static const unsigned denominators[] = {8, 4, 2};
        for (int i = 0; i < 3; i++) {
            if ((longest + denominators[i] - 1) / denominators[i] >= (unsigned long)max_pixel_size) {
                denominator = denominators[i];
                break;
            }
        }
    }
    info.scale_num = 1;
    info.scale_denom = denominator;
    info.out_color_space = JCS_EXT_RGBA;
    jpeg_start_decompress(&info);
    long width = info.output_width, height = info.output_height;
    pixels = malloc((size_t)(width * height * 4));
    if (!pixels) longjmp(failure.jump, 1);
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = pixels + (size_t)info.output_scanline * (size_t)width * 4;
        jpeg_read_scanlines(&info, &row, 1);
    }
    jpeg_finish_decompress(&info);
    jpeg_destroy_decompress(&info);
    long output_longest = width > height ? width : height;
    if (max_pixel_size > 0 && output_longest > max_pixel_size) {
        double factor = (double)max_pixel_size / (double)output_longest;
        long new_width = (long)(width * factor + 0.5), new_height = (long)(height * factor + 0.5);
        if (new_width < 1) new_width = 1;
        if (new_height < 1) new_height = 1;
        unsigned char *resampled = area_resample(pixels, width, height, new_width, new_height);
        free(pixels);
        if (!resampled) return -1;
        pixels = resampled;
        width = new_width;
        height = new_height;
    }
    out->pixels = pixels;
    out->width = width;
    out->height = height;
    return 0;
}

static void *decode_worker(void *argument) {
    pool *p = argument;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (!p->head && !p->closed) pthread_cond_wait(&p->ready, &p->lock);
        job *next = p->head;
        if (next) {
            p->head = next->next;
            if (!p->head) p->tail = NULL;
        }
        pthread_mutex_unlock(&p->lock);
        if (!next) return NULL;
        image decoded;
        int status = decode(next->body, next->length, p->max_pixel_size, &decoded);
        pthread_mutex_lock(&p->lock);
        if (p->spare_count < SPARE_BUFFERS) {
            p->spare[p->spare_count] = next->body;
            p->spare_capacity[p->spare_count++] = next->capacity;
        } else {
            free(next->body);
        }
        free(next);
        if (status == 0) {
            p->images[p->image_count++] = decoded;
            p->decoded++;
            p->pixels += decoded.width * decoded.height;
            p->last_width = decoded.width;
            p->last_height = decoded.height;
        } else {
            p->errors++;
        }
        pthread_mutex_unlock(&p->lock);
    }
}

static void submit(pool *p, unsigned char *body, size_t length, size_t capacity) {
    job *next = malloc(sizeof *next);
    if (!next) {
        free(body);
        pthread_mutex_lock(&p->lock);
        p->errors++;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    next->body = body;
    next->length = length;
    next->capacity = capacity;
    next->next = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->tail) p->tail->next = next; else p->head = next;
    p->tail = next;
    pthread_cond_signal(&p->ready);
    pthread_mutex_unlock(&p->lock);
}

/* ---- the transfers ---- */

typedef struct transfer {
    CURL *easy;
    unsigned char *body;
    size_t length, capacity;
    int failed;
} transfer;

static size_t write_body(char *data, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t bytes = size * count;
    if (t->length + bytes > t->capacity) {
        size_t capacity = t->capacity;
        if (t->length == 0) {
            /* The first chunk: room for the whole body at once when its length is known. */
            curl_off_t expected = -1;
            curl_easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &expected);
            if (expected > 0 && (size_t)expected > capacity) capacity = (size_t)expected;
        }
        if (capacity == 0) capacity = 64 << 10;
        while (capacity < t->length + bytes) capacity *= 2;
        unsigned char *grown = realloc(t->body, capacity);
        if (!grown) {
            t->failed = 1;
            return 0;
        }
        t->body = grown;
        t->capacity = capacity;
    }
    memcpy(t->body + t->length, data, bytes);
    t->length += bytes;
    return bytes;
}

static void start(CURLM *multi, pool *p, transfer *t, const char *url) {
    t->body = NULL;
    t->length = t->capacity = 0;
    t->failed = 0;
    pthread_mutex_lock(&p->lock);
    if (p->spare_count > 0) {
        p->spare_count--;
        t->body = p->spare[p->spare_count];
        t->capacity = p->spare_capacity[p->spare_count];
    }
    pthread_mutex_unlock(&p->lock);
    curl_easy_setopt(t->easy, CURLOPT_URL, url);
    curl_multi_add_handle(multi, t->easy);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int ipb_run(const ipb_config *config, ipb_result *result) {
    memset(result, 0, sizeof *result);
    double started = now_seconds();
    if (config->count <= 0 || config->concurrency <= 0 || config->decode_threads <= 0) return -1;
    pool p;
    memset(&p, 0, sizeof p);
    pthread_mutex_init(&p.lock, NULL);
    pthread_cond_init(&p.ready, NULL);
    p.max_pixel_size = config->max_pixel_size;
    p.images = calloc((size_t)config->count, sizeof(image));
    pthread_t *threads = calloc((size_t)config->decode_threads, sizeof(pthread_t));
    transfer *transfers = calloc((size_t)config->concurrency, sizeof(transfer));
    CURLM *multi = curl_multi_init();
    if (!p.images || !threads || !transfers || !multi) return -1;
    for (long i = 0; i < config->decode_threads; i++) pthread_create(&threads[i], NULL, decode_worker, &p);

    long next_url = 0, running_transfers = 0, transfer_errors = 0;
    long long bytes = 0;
    for (long i = 0; i < config->concurrency && next_url < config->count; i++) {
        transfer *t = &transfers[i];
        t->easy = curl_easy_init();
        curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, write_body);
        curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
        curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t);
        curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
        start(multi, &p, t, config->urls[next_url++]);
        running_transfers++;
    }
    while (running_transfers > 0) {
        int still_running = 0;
        curl_multi_perform(multi, &still_running);
        CURLMsg *message;
        int queued;
        while ((message = curl_multi_info_read(multi, &queued))) {
            if (message->msg != CURLMSG_DONE) continue;
            transfer *t = NULL;
            CURL *easy = message->easy_handle;
            curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&t);
            long status = 0;
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
            CURLcode code = message->data.result;
            curl_multi_remove_handle(multi, easy);
            if (code == CURLE_OK && !t->failed && status >= 200 && status < 300 && t->length > 0) {
                bytes += (long long)t->length;
                submit(&p, t->body, t->length, t->capacity);
            } else {
                free(t->body);
                transfer_errors++;
            }
            t->body = NULL;
            if (next_url < config->count) {
                start(multi, &p, t, config->urls[next_url++]);
            } else {
                running_transfers--;
            }
        }
        if (running_transfers > 0) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }

    result->transfer_seconds = now_seconds() - started;
    pthread_mutex_lock(&p.lock);
    p.closed = 1;
    pthread_cond_broadcast(&p.ready);
    pthread_mutex_unlock(&p.lock);
    for (long i = 0; i < config->decode_threads; i++) pthread_join(threads[i], NULL);

    result->decoded = p.decoded;
    result->errors = p.errors + transfer_errors;
    result->bytes = bytes;
    result->pixels = p.pixels;
    result->last_width = p.last_width;
    result->last_height = p.last_height;

    for (long i = 0; i < config->concurrency; i++) {
        if (transfers[i].easy) curl_easy_cleanup(transfers[i].easy);
    }
    curl_multi_cleanup(multi);
    for (long i = 0; i < p.image_count; i++) free(p.images[i].pixels);
    for (int i = 0; i < p.spare_count; i++) free(p.spare[i]);
    free(p.images);
    free(threads);
    free(transfers);
    pthread_mutex_destroy(&p.lock);
    pthread_cond_destroy(&p.ready);
    return 0;
}
