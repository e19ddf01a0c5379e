#ifndef CIMAGECODECS_H
#define CIMAGECODECS_H

// The system image libraries, for ImageLoading's decoders. Swift calls libpng's simplified
// API, giflib and libwebp directly; C holds only what Swift cannot do: libjpeg's error
// recovery (its error_exit must longjmp, and Swift cannot setjmp) and a few macros that do
// not import.

#include <stddef.h>
#include <stdio.h>   // jpeglib.h needs FILE and size_t first
#include <png.h>
#include <jpeglib.h>
#include <gif_lib.h>
#include <webp/decode.h>
#include <webp/demux.h>

/// libpng's `PNG_FORMAT_RGBA` (a macro built from other macros).
static const png_uint_32 CImagePNGFormatRGBA = PNG_FORMAT_RGBA;
/// libpng's `PNG_IMAGE_VERSION`.
static const png_uint_32 CImagePNGImageVersion = PNG_IMAGE_VERSION;
/// giflib's `GIF_OK`.
static const int CImageGIFOK = GIF_OK;

/// A libjpeg decompressor whose fatal errors come back as return codes.
typedef struct CImageJPEGDecoder CImageJPEGDecoder;

/// A decompressor with its error manager installed; NULL when out of memory.
CImageJPEGDecoder *_Nullable cimage_jpeg_create(void);
/// Frees the decompressor (safe after any failed step).
void cimage_jpeg_destroy(CImageJPEGDecoder *_Nonnull decoder);
/// libjpeg's state, to read the header fields and set the output parameters between steps.
struct jpeg_decompress_struct *_Nonnull cimage_jpeg_info(CImageJPEGDecoder *_Nonnull decoder);
/// Installs a progress monitor that fails the step in progress (as a fatal error would) once the
/// file reaches its `limit + 1`th scan; `limit` <= 0 means no limit.
void cimage_jpeg_set_scan_limit(CImageJPEGDecoder *_Nonnull decoder, int limit);

// Each step returns 0 on success, or 1 after libjpeg reported a fatal error; the decoder is
// then only fit for cimage_jpeg_destroy. `data` must stay valid until the decoder is destroyed.

/// jpeg_mem_src + jpeg_read_header.
int cimage_jpeg_read_header(CImageJPEGDecoder *_Nonnull decoder, const unsigned char *_Nonnull data,
                            unsigned long size);
/// jpeg_calc_output_dimensions (after setting scale and colour space).
int cimage_jpeg_calc_output_dimensions(CImageJPEGDecoder *_Nonnull decoder);
/// jpeg_start_decompress.
int cimage_jpeg_start(CImageJPEGDecoder *_Nonnull decoder);
/// The most rows cimage_jpeg_read_rows asks libjpeg for at once.
#define CIMAGE_JPEG_MAX_ROWS 16
/// jpeg_read_scanlines for up to `max_rows` (at most CIMAGE_JPEG_MAX_ROWS) consecutive rows,
/// `stride` bytes apart from `first_row` (negative: each row above the last, for an image
/// stored bottom up); `rows_read` receives the number of rows produced.
int cimage_jpeg_read_rows(CImageJPEGDecoder *_Nonnull decoder, unsigned char *_Nonnull first_row, ptrdiff_t stride,
                          unsigned int max_rows, unsigned int *_Nonnull rows_read);
/// jpeg_finish_decompress.
int cimage_jpeg_finish(CImageJPEGDecoder *_Nonnull decoder);

/// libjpeg's text for the last fatal error or premature-end warning ("" when none).
const char *_Nonnull cimage_jpeg_message(const CImageJPEGDecoder *_Nonnull decoder);
/// Non-zero once libjpeg ran out of data and padded the stream (JWRN_JPEG_EOF).
int cimage_jpeg_hit_end_of_data(const CImageJPEGDecoder *_Nonnull decoder);
/// Non-zero once a step failed because the file has more scans than cimage_jpeg_set_scan_limit allows.
int cimage_jpeg_scan_limit_exceeded(const CImageJPEGDecoder *_Nonnull decoder);

#endif
