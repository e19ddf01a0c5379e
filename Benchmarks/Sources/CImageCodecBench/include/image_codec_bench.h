#ifndef IMAGE_CODEC_BENCH_H
#define IMAGE_CODEC_BENCH_H

/* The reference decoders of the decode benchmark: each codec library called directly, as a
 * competent C user would, producing what Curlew's `Image(data:)` produces (straight-alpha
 * RGBA8, rows packed, a fresh malloc'd buffer per decode, freed before returning). The Swift
 * executable times these calls against Curlew's; this file only decodes. */

#include <stddef.h>

/* What one decode produced, so the caller can check both sides agree on the size. */
typedef struct icb_result {
    int width;
    int height;
    int frames;                 /* 1 for a still image */
    unsigned long long checksum; /* a few sampled bytes, so no decode can be optimised away */
} icb_result;

/* libjpeg(-turbo): out_color_space JCS_EXT_RGBA, 1/scale_denom (1, 2, 4, 8), rows read
 * rec_outbuf_height at a time straight into the output buffer. Returns 0 on success. */
int icb_decode_jpeg(const unsigned char *data, size_t size, int scale_denom, icb_result *out);

/* The downscaled cases: libpng, giflib and libwebp cannot scale an image with alpha while
 * decoding (libwebp's rescaler averages colour without weighting it by alpha), so a C user
 * decodes whole and resamples. This is that resampler, written plainly in C: an area (box)
 * filter on premultiplied colour, separable (each source row shrunk horizontally once, then
 * summed into the output row with its vertical weight), float, precomputed per-column weights,
 * the same filter Curlew applies, so both sides do the same work. `maximum` is the longest
 * side wanted (0 or a size that already fits: no resampling); the fitted size is rounded as
 * Curlew's `Image.fittedSize` rounds it. */
unsigned char *icb_area_resample(const unsigned char *source, int width, int height, int new_width, int new_height);
int icb_fitted_size(int width, int height, int maximum, int *fitted_width, int *fitted_height);

/* libpng's simplified API (png_image_begin_read_from_memory / finish_read) into RGBA, then
 * downscaled to fit `maximum` (0: full size). */
int icb_decode_png(const unsigned char *data, size_t size, int maximum, icb_result *out);

/* giflib: DGifOpen from memory, DGifSlurp, then every frame composed (transparency, disposal)
 * onto an RGBA canvas, each frame's canvas kept as its own buffer as Curlew keeps them (or,
 * with `maximum`, each frame downscaled straight from the canvas). */
int icb_decode_gif(const unsigned char *data, size_t size, int maximum, icb_result *out);

/* libwebp: WebPDecodeRGBA at full size (scaled_width == 0), or WebPDecode with libwebp's
 * own rescaler to scaled_width x scaled_height. */
int icb_decode_webp(const unsigned char *data, size_t size, int scaled_width, int scaled_height, icb_result *out);

/* libwebp: WebPDecodeRGBA, then the area resampler above to fit `maximum` (a WebP with alpha,
 * which Curlew does not hand to libwebp's rescaler). */
int icb_decode_webp_fit(const unsigned char *data, size_t size, int maximum, icb_result *out);

/* libwebp's animation decoder (WebPAnimDecoder, RGBA): every composed frame kept as its own
 * buffer as Curlew keeps them, or with `maximum` downscaled straight from the canvas. */
int icb_decode_webp_animation(const unsigned char *data, size_t size, int maximum, icb_result *out);

#endif
