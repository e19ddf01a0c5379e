#ifndef IMAGE_PIPELINE_BENCH_H
#define IMAGE_PIPELINE_BENCH_H

/* The C baseline of the image pipeline workload (Scripts/bench-pipeline.sh): what a C
 * programmer writes to fetch and downscale many JPEGs. One thread drives libcurl multi with
 * `concurrency` transfers in flight, each body into a buffer pre-sized from Content-Length;
 * a finished body goes to a pool of `decode_threads` threads that decode it with libjpeg at
 * the smallest 1/1, 1/2, 1/4 or 1/8 scale whose long side is still >= `max_pixel_size`, to
 * RGBA, then (only if that is still larger) box-filter it down to `max_pixel_size`, as
 * Curlew's ImageResponseSerializer does. The decoded images are kept until the run ends (as
 * Curlew's image cache keeps them). The Swift executable measures time and CPU around it. */

#include <stddef.h>

typedef struct ipb_config {
    const char *const *urls; /* the images to fetch, each once */
    long count;
    long concurrency;        /* transfers in flight at once */
    long decode_threads;     /* decoding pool size */
    long max_pixel_size;     /* the long side to decode to (0: full size) */
} ipb_config;

typedef struct ipb_result {
    long decoded;            /* images fetched with a 2xx status and decoded */
    long errors;             /* transfers or decodes that failed */
    long long bytes;         /* body bytes received */
    long long pixels;        /* decoded pixels in all images */
    long last_width;         /* the size of one decoded image, for the report */
    long last_height;
    double transfer_seconds; /* from the start until the last body had arrived */
} ipb_result;

/* Runs the whole workload; returns 0, or -1 when setup failed. */
int ipb_run(const ipb_config *config, ipb_result *result);

#endif
