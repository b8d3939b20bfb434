/*
 * hset.c -- HTTP/3 header fields: the header set interface (ea_hsi_if) that keeps what the
 * harness needs of a request or response, after lsquic's bin/http_server.c
 * (interop_server_hset_*), and the lsxpack_header array of an outgoing header block.
 */
#include <stdlib.h>
#include <string.h>

#include "qir.h"

static void *
hset_create (void *ctx, lsquic_stream_t *stream, int is_push_promise)
{
    struct qir_hset *h = calloc(1, sizeof(*h));
    (void) ctx;
    (void) stream;
    (void) is_push_promise;
    if (h)
        h->content_length = -1;
    return h;
}


static struct lsxpack_header *
hset_prepare_decode (void *hset, struct lsxpack_header *xhdr, size_t space)
{
    struct qir_hset *h = hset;
    /* Each field is decoded into buf and copied out in hset_process_header. */
    if (xhdr || space > sizeof(h->buf))
        return NULL;
    lsxpack_header_prepare_decode(&h->xhdr, h->buf, 0, sizeof(h->buf));
    return &h->xhdr;
}


static void
copy_value (char *dst, size_t dst_size, const struct lsxpack_header *x)
{
    size_t len = x->val_len < dst_size - 1 ? x->val_len : dst_size - 1;
    memcpy(dst, lsxpack_header_get_value(x), len);
    dst[len] = '\0';
}


static int
hset_process_header (void *hset, struct lsxpack_header *x)
{
    struct qir_hset *h = hset;
    const char *name;
    char val[32];

    if (!x)
        return 0;   /* end of the header block */
    name = lsxpack_header_get_name(x);
#define IS(s) (x->name_len == sizeof(s) - 1 && 0 == memcmp(name, s, sizeof(s) - 1))
    if (IS(":status"))
        copy_value(h->status, sizeof(h->status), x);
    else if (IS(":path"))
    {
        if (x->val_len >= sizeof(h->path))
            return 1;   /* a positive value refuses the stream */
        copy_value(h->path, sizeof(h->path), x);
    }
    else if (IS("content-length"))
    {
        copy_value(val, sizeof(val), x);
        h->content_length = strtoll(val, NULL, 10);
    }
#undef IS
    return 0;
}


void
qir_hset_destroy (void *hset)
{
    free(hset);
}


const struct lsquic_hset_if qir_hset_if = {
    .hsi_create_header_set = hset_create,
    .hsi_prepare_decode = hset_prepare_decode,
    .hsi_process_header = hset_process_header,
    .hsi_discard_header_set = qir_hset_destroy,
};


int
qir_header_add (struct qir_headers *hs, const char *name, const char *value)
{
    size_t nlen = strlen(name), vlen = strlen(value);

    if (hs->count >= (int) (sizeof(hs->h) / sizeof(hs->h[0]))
        || hs->off + nlen + vlen > sizeof(hs->buf))
        return -1;
    memcpy(hs->buf + hs->off, name, nlen);
    memcpy(hs->buf + hs->off + nlen, value, vlen);
    lsxpack_header_set_offset2(&hs->h[hs->count++], hs->buf + hs->off, 0, nlen, nlen, vlen);
    hs->off += nlen + vlen;
    return 0;
}
