// libjpeg's error recovery: its error_exit must not return, so it longjmps back into the
// step that called libjpeg, which returns an error code for Swift to turn into an ImageError.

#include "CImageCodecs.h"

#include <jerror.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct CImageJPEGDecoder {
    struct jpeg_decompress_struct info;
    struct jpeg_error_mgr error;
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
    int created;
    int hit_end_of_data;
    int scan_limit;
    int scan_limit_exceeded;
    char message[JMSG_LENGTH_MAX];
};

static void cimage_jpeg_error_exit(j_common_ptr info) {
    CImageJPEGDecoder *decoder = (CImageJPEGDecoder *)info->client_data;
    info->err->format_message(info, decoder->message);
    longjmp(decoder->jump, 1);
}

// Warnings never reach stderr; running out of data is remembered so Swift can report a
// truncated file instead of the grey padding libjpeg substitutes.
static void cimage_jpeg_emit_message(j_common_ptr info, int level) {
    CImageJPEGDecoder *decoder = (CImageJPEGDecoder *)info->client_data;
    if (level >= 0) return;
    info->err->num_warnings++;
    if (info->err->msg_code == JWRN_JPEG_EOF && !decoder->hit_end_of_data) {
        decoder->hit_end_of_data = 1;
        info->err->format_message(info, decoder->message);
    }
}

static void cimage_jpeg_output_message(j_common_ptr info) { (void)info; }

// libjpeg calls this before each chunk of input it consumes (once per iMCU row of a scan, and
// once per marker run): every scan of a multi-scan file costs a pass over all its blocks, even
// an empty one, so a file with thousands of scans is stopped as soon as it reaches one too many.
// It runs inside the step that called libjpeg, so the step's setjmp is the one to return to.
static void cimage_jpeg_progress(j_common_ptr info) {
    CImageJPEGDecoder *decoder = (CImageJPEGDecoder *)info->client_data;
    if (!info->is_decompressor || decoder->scan_limit <= 0) return;
    if (((j_decompress_ptr)info)->input_scan_number <= decoder->scan_limit) return;
    decoder->scan_limit_exceeded = 1;
    snprintf(decoder->message, sizeof decoder->message, "the file has more than %d scans", decoder->scan_limit);
    longjmp(decoder->jump, 1);
}

CImageJPEGDecoder *cimage_jpeg_create(void) {
    CImageJPEGDecoder *decoder = calloc(1, sizeof(CImageJPEGDecoder));
    if (decoder == NULL) return NULL;
    decoder->info.err = jpeg_std_error(&decoder->error);
    decoder->error.error_exit = cimage_jpeg_error_exit;
    decoder->error.emit_message = cimage_jpeg_emit_message;
    decoder->error.output_message = cimage_jpeg_output_message;
    decoder->info.client_data = decoder;
    if (setjmp(decoder->jump)) {
        free(decoder);
        return NULL;
    }
    jpeg_create_decompress(&decoder->info);
    decoder->created = 1;
    return decoder;
}

void cimage_jpeg_destroy(CImageJPEGDecoder *decoder) {
    if (decoder->created) jpeg_destroy_decompress(&decoder->info);
    free(decoder);
}

struct jpeg_decompress_struct *cimage_jpeg_info(CImageJPEGDecoder *decoder) { return &decoder->info; }

void cimage_jpeg_set_scan_limit(CImageJPEGDecoder *decoder, int limit) {
    decoder->scan_limit = limit;
    decoder->progress.progress_monitor = cimage_jpeg_progress;
    decoder->info.progress = &decoder->progress;
}

int cimage_jpeg_read_header(CImageJPEGDecoder *decoder, const unsigned char *data, unsigned long size) {
    if (setjmp(decoder->jump)) return 1;
    jpeg_mem_src(&decoder->info, data, size);
    jpeg_read_header(&decoder->info, TRUE);
    return 0;
}

int cimage_jpeg_calc_output_dimensions(CImageJPEGDecoder *decoder) {
    if (setjmp(decoder->jump)) return 1;
    jpeg_calc_output_dimensions(&decoder->info);
    return 0;
}

int cimage_jpeg_start(CImageJPEGDecoder *decoder) {
    if (setjmp(decoder->jump)) return 1;
    jpeg_start_decompress(&decoder->info);
    return 0;
}

int cimage_jpeg_read_rows(CImageJPEGDecoder *decoder, unsigned char *first_row, ptrdiff_t stride,
                          unsigned int max_rows, unsigned int *rows_read) {
    if (setjmp(decoder->jump)) return 1;
    // libjpeg produces up to rec_outbuf_height rows per call (more with DCT scaling): asking for
    // a batch lets it write them all straight into the image instead of one call per row.
    JSAMPROW rows[CIMAGE_JPEG_MAX_ROWS];
    unsigned int count = max_rows < CIMAGE_JPEG_MAX_ROWS ? max_rows : CIMAGE_JPEG_MAX_ROWS;
    for (unsigned int i = 0; i < count; i++) rows[i] = first_row + (ptrdiff_t)i * stride;
    *rows_read = count > 0 ? jpeg_read_scanlines(&decoder->info, rows, count) : 0;
    return 0;
}

int cimage_jpeg_finish(CImageJPEGDecoder *decoder) {
    if (setjmp(decoder->jump)) return 1;
    jpeg_finish_decompress(&decoder->info);
    return 0;
}

const char *cimage_jpeg_message(const CImageJPEGDecoder *decoder) { return decoder->message; }

int cimage_jpeg_hit_end_of_data(const CImageJPEGDecoder *decoder) { return decoder->hit_end_of_data; }

int cimage_jpeg_scan_limit_exceeded(const CImageJPEGDecoder *decoder) { return decoder->scan_limit_exceeded; }
