// The decode benchmark's C baseline: see include/image_codec_bench.h.

#include "image_codec_bench.h"

#include <gif_lib.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
#include <math.h>
#include <webp/decode.h>
#include <webp/demux.h>

static unsigned long long sample(const unsigned char *pixels, size_t count) {
    unsigned long long sum = 0;
    for (size_t i = 0; i < count; i += 4099) sum += pixels[i];
    return sum + pixels[count - 1];
}

// MARK: JPEG

struct icb_jpeg_error {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
};

static void icb_jpeg_error_exit(j_common_ptr info) {
    longjmp(((struct icb_jpeg_error *)info->err)->jump, 1);
}

static void icb_jpeg_silent(j_common_ptr info, int level) { (void)info; (void)level; }

int icb_decode_jpeg(const unsigned char *data, size_t size, int scale_denom, icb_result *out) {
    struct jpeg_decompress_struct info;
    struct icb_jpeg_error error;
    unsigned char *volatile pixels = NULL;
    info.err = jpeg_std_error(&error.manager);
    error.manager.error_exit = icb_jpeg_error_exit;
    error.manager.emit_message = icb_jpeg_silent;
    if (setjmp(error.jump)) {
        jpeg_destroy_decompress(&info);
        free(pixels);
        return 1;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, data, (unsigned long)size);
    jpeg_read_header(&info, TRUE);
    info.scale_num = 1;
    info.scale_denom = (unsigned)scale_denom;
    info.out_color_space = JCS_EXT_RGBA;
    jpeg_start_decompress(&info);
    size_t stride = (size_t)info.output_width * 4;
    size_t count = stride * info.output_height;
    pixels = malloc(count);
    if (pixels == NULL) longjmp(error.jump, 1);
    JSAMPROW rows[16];
    while (info.output_scanline < info.output_height) {
        int batch = info.rec_outbuf_height < 16 ? info.rec_outbuf_height : 16;
        for (int i = 0; i < batch; i++) {
            unsigned line = info.output_scanline + (unsigned)i;
            if (line >= info.output_height) line = info.output_height - 1;
            rows[i] = pixels + (size_t)line * stride;
        }
        jpeg_read_scanlines(&info, rows, (JDIMENSION)batch);
    }
    jpeg_finish_decompress(&info);
    out->width = (int)info.output_width;
    out->height = (int)info.output_height;
    out->frames = 1;
    out->checksum = sample(pixels, count);
    jpeg_destroy_decompress(&info);
    free(pixels);
    return 0;
}

// MARK: Downscaling

/* One output pixel's source span along an axis: `count` pixels from `first`, with a weight
 * each (coverage of the output pixel divided by the ratio, so they sum to 1). */
struct icb_span {
    int first, count;
    float *weights;
};

static struct icb_span *icb_spans(int source, int target, float **storage) {
    double ratio = (double)source / target;
    int most = (int)ratio + 2;
    struct icb_span *spans = malloc((size_t)target * sizeof *spans);
    float *weights = malloc((size_t)target * (size_t)most * sizeof *weights);
    if (spans == NULL || weights == NULL) { free(spans); free(weights); return NULL; }
    for (int i = 0; i < target; i++) {
        double start = i * ratio, end = (i + 1) * ratio;
        if (end > source) end = source;
        int first = (int)start, last = (int)ceil(end) - 1;
        if (last > source - 1) last = source - 1;
        if (last < first) last = first;
        spans[i].first = first;
        spans[i].count = last - first + 1;
        spans[i].weights = weights + (size_t)i * (size_t)most;
        for (int p = first; p <= last; p++) {
            double lo = start > p ? start : p, hi = end < p + 1 ? end : p + 1;
            spans[i].weights[p - first] = (float)((hi > lo ? hi - lo : 0) / ratio);
        }
    }
    *storage = weights;
    return spans;
}

static unsigned char icb_byte(float value) {
    return value <= 0 ? 0 : value >= 255 ? 255 : (unsigned char)lrintf(value);
}

int icb_fitted_size(int width, int height, int maximum, int *fitted_width, int *fitted_height) {
    int longest = width > height ? width : height;
    if (longest <= maximum) return 0;
    double factor = (double)maximum / longest;
    int w = (int)round(width * factor), h = (int)round(height * factor);
    *fitted_width = w < 1 ? 1 : w > maximum ? maximum : w;
    *fitted_height = h < 1 ? 1 : h > maximum ? maximum : h;
    return 1;
}

unsigned char *icb_area_resample(const unsigned char *source, int width, int height, int new_width, int new_height) {
    float *column_weights = NULL, *row_weights = NULL;
    struct icb_span *columns = icb_spans(width, new_width, &column_weights);
    struct icb_span *rows = icb_spans(height, new_height, &row_weights);
    float *shrunk = malloc((size_t)new_width * 4 * sizeof *shrunk);
    float *summed = malloc((size_t)new_width * 4 * sizeof *summed);
    unsigned char *target = malloc((size_t)new_width * (size_t)new_height * 4);
    if (columns == NULL || rows == NULL || shrunk == NULL || summed == NULL || target == NULL) {
        free(target);
        target = NULL;
        goto done;
    }
    int shrunk_row = -1;
    for (int y = 0; y < new_height; y++) {
        memset(summed, 0, (size_t)new_width * 4 * sizeof *summed);
        for (int k = 0; k < rows[y].count; k++) {
            int sy = rows[y].first + k;
            if (sy != shrunk_row) {
                // The source row shrunk horizontally, premultiplied.
                const unsigned char *line = source + (size_t)sy * (size_t)width * 4;
                for (int x = 0; x < new_width; x++) {
                    const struct icb_span *span = &columns[x];
                    const unsigned char *p = line + (size_t)span->first * 4;
                    float r = 0, g = 0, b = 0, a = 0;
                    for (int i = 0; i < span->count; i++, p += 4) {
                        float alpha = p[3] * span->weights[i];
                        r += p[0] * alpha; g += p[1] * alpha; b += p[2] * alpha; a += alpha;
                    }
                    float *s = shrunk + x * 4;
                    s[0] = r / 255; s[1] = g / 255; s[2] = b / 255; s[3] = a;
                }
                shrunk_row = sy;
            }
            float weight = rows[y].weights[k];
            for (int i = 0; i < new_width * 4; i++) summed[i] += shrunk[i] * weight;
        }
        unsigned char *out = target + (size_t)y * (size_t)new_width * 4;
        for (int x = 0; x < new_width; x++) {
            const float *s = summed + x * 4;
            out[x * 4 + 3] = icb_byte(s[3]);
            if (s[3] <= 0) { memset(out + x * 4, 0, 3); continue; }
            float unpremultiply = 255 / s[3];
            out[x * 4] = icb_byte(s[0] * unpremultiply);
            out[x * 4 + 1] = icb_byte(s[1] * unpremultiply);
            out[x * 4 + 2] = icb_byte(s[2] * unpremultiply);
        }
    }
done:
    free(columns); free(column_weights); free(rows); free(row_weights); free(shrunk); free(summed);
    return target;
}

/* Replaces *pixels (width x height) by its downscaled copy when it is larger than `maximum`;
 * returns 0 on success and sets the new size. */
static int icb_fit(unsigned char **pixels, int *width, int *height, int maximum) {
    int new_width, new_height;
    if (maximum <= 0 || !icb_fitted_size(*width, *height, maximum, &new_width, &new_height)) return 0;
    unsigned char *scaled = icb_area_resample(*pixels, *width, *height, new_width, new_height);
    if (scaled == NULL) return 1;
    free(*pixels);
    *pixels = scaled;
    *width = new_width;
    *height = new_height;
    return 0;
}

// MARK: PNG

int icb_decode_png(const unsigned char *data, size_t size, int maximum, icb_result *out) {
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&image, data, size)) return 1;
    image.format = PNG_FORMAT_RGBA;
    size_t count = PNG_IMAGE_SIZE(image);
    unsigned char *pixels = malloc(count);
    if (pixels == NULL) { png_image_free(&image); return 1; }
    if (!png_image_finish_read(&image, NULL, pixels, 0, NULL)) { free(pixels); return 1; }
    int width = (int)image.width, height = (int)image.height;
    if (icb_fit(&pixels, &width, &height, maximum) != 0) { free(pixels); return 1; }
    out->width = width;
    out->height = height;
    out->frames = 1;
    out->checksum = sample(pixels, (size_t)width * (size_t)height * 4);
    free(pixels);
    return 0;
}

// MARK: GIF

struct icb_gif_source {
    const unsigned char *data;
    size_t size, position;
};

static int icb_gif_read(GifFileType *gif, GifByteType *buffer, int length) {
    struct icb_gif_source *source = gif->UserData;
    size_t available = source->size - source->position;
    size_t count = (size_t)length < available ? (size_t)length : available;
    memcpy(buffer, source->data + source->position, count);
    source->position += count;
    return (int)count;
}

int icb_decode_gif(const unsigned char *data, size_t size, int maximum, icb_result *out) {
    struct icb_gif_source source = {data, size, 0};
    int status = 0;
    GifFileType *gif = DGifOpen(&source, icb_gif_read, &status);
    if (gif == NULL) return 1;
    if (DGifSlurp(gif) != GIF_OK || gif->ImageCount < 1) { DGifCloseFile(gif, &status); return 1; }
    int width = gif->SWidth, height = gif->SHeight;
    size_t count = (size_t)width * (size_t)height * 4;
    unsigned char **frames = calloc((size_t)gif->ImageCount, sizeof *frames);
    unsigned char *canvas = calloc(1, count);
    unsigned char *saved = NULL;
    int disposal = DISPOSAL_UNSPECIFIED;
    GifImageDesc previous = {0};
    unsigned long long checksum = 0;
    int out_width = width, out_height = height, failed = 0;
    int scaled = maximum > 0 && icb_fitted_size(width, height, maximum, &out_width, &out_height);
    for (int index = 0; index < gif->ImageCount; index++) {
        const SavedImage *image = &gif->SavedImages[index];
        const GifImageDesc *desc = &image->ImageDesc;
        // The previous frame's disposal, then this frame's own.
        if (disposal == DISPOSE_BACKGROUND) {
            for (int y = previous.Top; y < previous.Top + previous.Height && y < height; y++) {
                int left = previous.Left, right = previous.Left + previous.Width;
                if (right > width) right = width;
                if (left < right) memset(canvas + ((size_t)y * width + left) * 4, 0, (size_t)(right - left) * 4);
            }
        } else if (disposal == DISPOSE_PREVIOUS && saved != NULL) {
            memcpy(canvas, saved, count);
        }
        GraphicsControlBlock gcb = {DISPOSAL_UNSPECIFIED, false, 0, NO_TRANSPARENT_COLOR};
        DGifSavedExtensionToGCB(gif, index, &gcb);
        if (gcb.DisposalMode == DISPOSE_PREVIOUS) {
            if (saved == NULL) saved = malloc(count);
            memcpy(saved, canvas, count);
        }
        const ColorMapObject *map = desc->ColorMap ? desc->ColorMap : gif->SColorMap;
        if (map != NULL) {
            // The palette as 4-byte RGBA words once, then one store per opaque pixel.
            unsigned char palette[256][4];
            for (int i = 0; i < 256; i++) {
                const GifColorType *c = &map->Colors[i < map->ColorCount ? i : 0];
                palette[i][0] = c->Red; palette[i][1] = c->Green; palette[i][2] = c->Blue; palette[i][3] = 255;
            }
            int columns = desc->Left + desc->Width > width ? width - desc->Left : desc->Width;
            int rows = desc->Top + desc->Height > height ? height - desc->Top : desc->Height;
            for (int y = 0; y < rows; y++) {
                const GifByteType *line = image->RasterBits + (size_t)y * desc->Width;
                unsigned char *target = canvas + ((size_t)(desc->Top + y) * width + desc->Left) * 4;
                for (int x = 0; x < columns; x++) {
                    int c = line[x];
                    if (c == gcb.TransparentColor || c >= map->ColorCount) continue;
                    memcpy(target + x * 4, palette[c], 4);
                }
            }
        }
        // Each frame kept: the canvas itself, or its downscaled copy straight from the canvas.
        if (scaled) {
            frames[index] = icb_area_resample(canvas, width, height, out_width, out_height);
        } else if ((frames[index] = malloc(count)) != NULL) {
            memcpy(frames[index], canvas, count);
        }
        if (frames[index] == NULL) { failed = 1; break; }
        checksum += sample(frames[index], (size_t)out_width * (size_t)out_height * 4);
        disposal = gcb.DisposalMode;
        previous = *desc;
    }
    out->width = out_width;
    out->height = out_height;
    out->frames = gif->ImageCount;
    if (failed) out->frames = 0;
    out->checksum = checksum;
    for (int index = 0; index < gif->ImageCount; index++) free(frames[index]);
    free(frames);
    free(canvas);
    free(saved);
    DGifCloseFile(gif, &status);
    return failed;
}

// MARK: WebP

int icb_decode_webp(const unsigned char *data, size_t size, int scaled_width, int scaled_height, icb_result *out) {
    if (scaled_width <= 0) {
        int width = 0, height = 0;
        uint8_t *pixels = WebPDecodeRGBA(data, size, &width, &height);
        if (pixels == NULL) return 1;
        out->width = width;
        out->height = height;
        out->frames = 1;
        out->checksum = sample(pixels, (size_t)width * (size_t)height * 4);
        WebPFree(pixels);
        return 0;
    }
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config)) return 1;
    config.options.use_scaling = 1;
    config.options.scaled_width = scaled_width;
    config.options.scaled_height = scaled_height;
    config.output.colorspace = MODE_RGBA;
    if (WebPDecode(data, size, &config) != VP8_STATUS_OK) return 1;
    out->width = config.output.width;
    out->height = config.output.height;
    out->frames = 1;
    out->checksum = sample(config.output.u.RGBA.rgba, config.output.u.RGBA.size);
    WebPFreeDecBuffer(&config.output);
    return 0;
}

int icb_decode_webp_fit(const unsigned char *data, size_t size, int maximum, icb_result *out) {
    int width = 0, height = 0, new_width, new_height;
    uint8_t *pixels = WebPDecodeRGBA(data, size, &width, &height);
    if (pixels == NULL) return 1;
    unsigned char *result = pixels;
    if (icb_fitted_size(width, height, maximum, &new_width, &new_height)) {
        result = icb_area_resample(pixels, width, height, new_width, new_height);
        WebPFree(pixels);
        if (result == NULL) return 1;
        width = new_width;
        height = new_height;
    }
    out->width = width;
    out->height = height;
    out->frames = 1;
    out->checksum = sample(result, (size_t)width * (size_t)height * 4);
    if (result == pixels) WebPFree(pixels); else free(result);
    return 0;
}

int icb_decode_webp_animation(const unsigned char *data, size_t size, int maximum, icb_result *out) {
    WebPAnimDecoderOptions options;
    if (!WebPAnimDecoderOptionsInit(&options)) return 1;
    options.color_mode = MODE_RGBA;
    WebPData webp = {data, size};
    WebPAnimDecoder *decoder = WebPAnimDecoderNew(&webp, &options);
    if (decoder == NULL) return 1;
    WebPAnimInfo info;
    if (!WebPAnimDecoderGetInfo(decoder, &info)) { WebPAnimDecoderDelete(decoder); return 1; }
    int width = (int)info.canvas_width, height = (int)info.canvas_height;
    int out_width = width, out_height = height;
    int scaled = maximum > 0 && icb_fitted_size(width, height, maximum, &out_width, &out_height);
    size_t count = (size_t)width * (size_t)height * 4;
    unsigned char **frames = calloc(info.frame_count, sizeof *frames);
    int produced = 0, failed = frames == NULL;
    unsigned long long checksum = 0;
    while (!failed && WebPAnimDecoderHasMoreFrames(decoder)) {
        uint8_t *canvas;
        int timestamp;
        if (!WebPAnimDecoderGetNext(decoder, &canvas, &timestamp) || produced >= (int)info.frame_count) { failed = 1; break; }
        // Each frame kept, as Curlew keeps them: the canvas copied, or downscaled straight from it.
        unsigned char *frame = scaled ? icb_area_resample(canvas, width, height, out_width, out_height) : malloc(count);
        if (frame == NULL) { failed = 1; break; }
        if (!scaled) memcpy(frame, canvas, count);
        checksum += sample(frame, (size_t)out_width * (size_t)out_height * 4);
        frames[produced++] = frame;
    }
    for (int i = 0; i < produced; i++) free(frames[i]);
    free(frames);
    WebPAnimDecoderDelete(decoder);
    out->width = out_width;
    out->height = out_height;
    out->frames = produced;
    out->checksum = checksum;
    return failed;
}
