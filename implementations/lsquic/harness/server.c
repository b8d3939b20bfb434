/*
 * server.c -- serves the files below $WWW on $IP:$PORT over HTTP/3 (h3) or HTTP/0.9 over QUIC
 * (hq-interop), one connection after another, until SIGTERM.
 *
 * After lsquic's bin/http_server.c: a header set interface for the request's :path
 * (interop_server_hset_*), the response body written with lsquic_stream_writef() from a
 * reader that pread()s the file (never the whole file in memory), and its hq mode (-Q) as an
 * engine without LSENG_HTTP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qir.h"

struct server
{
    const struct qir_config *cfg;
    const char *www;
    SSL_CTX *ssl_ctx;
};

struct lsquic_conn_ctx
{
    const char *cc;     /* congestion controller lsquic logged for this connection */
};

struct lsquic_stream_ctx
{
    struct server *srv;
    char req[1024];     /* hq-interop: the request line as read so far */
    size_t req_len;
    char path[1024];    /* request path */
    int have_request;
    int fd;             /* file being sent, -1: none */
    uint64_t size, off;
};

static struct server s_server;


static SSL_CTX *
get_ssl_ctx (void *peer_ctx, const struct sockaddr *local)
{
    (void) peer_ctx;
    (void) local;
    return s_server.ssl_ctx;
}


static lsquic_conn_ctx_t *
on_new_conn (void *ctx, lsquic_conn_t *conn)
{
    struct lsquic_conn_ctx *c = calloc(1, sizeof(*c));
    (void) ctx;
    if (!c)
        qir_die("out of memory");
    /* The full connection exists once the handshake is done: lsquic has initialised its
     * congestion controller and logged it. */
    c->cc = qir_cc_take();
    qir_cc_conn_opened();
    qir_print_negotiated(conn, c->cc);
    return c;
}


static void
on_conn_closed (lsquic_conn_t *conn)
{
    struct lsquic_conn_ctx *c = lsquic_conn_get_ctx(conn);
    char status[200];

    qir_conn_status(conn, status, sizeof(status));
    qir_print_conn_info(conn);
    qir_log("connection closed (%s)", status);
    if (c)
    {
        qir_cc_conn_closed();
        free(c);
    }
    lsquic_conn_set_ctx(conn, NULL);
}


static lsquic_stream_ctx_t *
on_new_stream (void *ctx, lsquic_stream_t *stream)
{
    struct lsquic_stream_ctx *st = calloc(1, sizeof(*st));
    if (!st)
        qir_die("out of memory");
    st->srv = ctx;
    st->fd = -1;
    lsquic_stream_wantread(stream, 1);
    return st;
}


/* The file below WWW that the request path names: no "..", query and fragment dropped. */
static int
open_file (struct lsquic_stream_ctx *st)
{
    char full[4096];
    struct stat sb;
    char *p;

    p = strpbrk(st->path, "?#");
    if (p)
        *p = '\0';
    if (st->path[0] != '/' || strstr(st->path, "/../") || 0 == strcmp(st->path, "/")
        || (strlen(st->path) >= 3 && 0 == strcmp(st->path + strlen(st->path) - 3, "/..")))
        return -1;
    if ((size_t) snprintf(full, sizeof(full), "%s%s", st->srv->www, st->path) >= sizeof(full))
        return -1;
    st->fd = open(full, O_RDONLY | O_CLOEXEC);
    if (st->fd < 0)
        return -1;
    if (0 != fstat(st->fd, &sb) || !S_ISREG(sb.st_mode))
    {
        close(st->fd);
        st->fd = -1;
        return -1;
    }
    st->size = (uint64_t) sb.st_size;
    st->off = 0;
    return 0;
}


/* lsquic_reader over the open file: lsquic passes the buffer of the STREAM frame. */
static size_t
file_read (void *ctx, void *buf, size_t count)
{
    struct lsquic_stream_ctx *st = ctx;
    ssize_t nr;

    if (count > st->size - st->off)
        count = st->size - st->off;
    do
        nr = pread(st->fd, buf, count, (off_t) st->off);
    while (nr < 0 && errno == EINTR);
    if (nr <= 0)
    {
        qir_log("reading %s: %s", st->path, nr < 0 ? strerror(errno) : "file got shorter");
        st->size = st->off;     /* ends the response early; the client sees it is short */
        return 0;
    }
    st->off += (uint64_t) nr;
    return (size_t) nr;
}


static size_t
file_size (void *ctx)
{
    struct lsquic_stream_ctx *st = ctx;
    return st->size - st->off;
}


static void
respond (lsquic_stream_t *stream, struct lsquic_stream_ctx *st)
{
    int found = 0 == open_file(st);

    if (!st->srv->cfg->hq)
    {
        struct qir_headers hs = { .count = 0 };
        char len[24];

        snprintf(len, sizeof(len), "%" PRIu64, found ? st->size : 0);
        qir_header_add(&hs, ":status", found ? "200" : "404");
        qir_header_add(&hs, "content-length", len);
        lsquic_http_headers_t headers = { .count = hs.count, .headers = hs.h };
        if (0 != lsquic_stream_send_headers(stream, &headers, 0))
        {
            qir_log("cannot send headers: %s", strerror(errno));
            lsquic_stream_close(stream);
            return;
        }
    }
    if (!found)
    {
        qir_log("%s: not found", st->path);
        lsquic_stream_shutdown(stream, 1);  /* h3: the 404 without body; hq: empty */
        return;
    }
    qir_log("sending %s (%" PRIu64 " bytes)", st->path, st->size);
    lsquic_stream_wantwrite(stream, 1);
}


/* h3: the request's header set, then the (empty) body up to its FIN. */
static void
read_h3_request (lsquic_stream_t *stream, struct lsquic_stream_ctx *st)
{
    char buf[512];
    ssize_t nr;

    if (!st->have_request)
    {
        struct qir_hset *h = lsquic_stream_get_hset(stream);
        if (!h)
        {
            qir_log("request without headers");
            lsquic_stream_close(stream);
            return;
        }
        memcpy(st->path, h->path, sizeof(st->path));
        qir_hset_destroy(h);
        st->have_request = 1;
    }
    while ((nr = lsquic_stream_read(stream, buf, sizeof(buf))) > 0)
        ;
    if (nr < 0 && (errno == EWOULDBLOCK || errno == EAGAIN))
        return;
    lsquic_stream_wantread(stream, 0);
    if (nr < 0)
    {
        qir_log("reading the request: %s", strerror(errno));
        lsquic_stream_close(stream);
        return;
    }
    respond(stream, st);
}


/* hq-interop: "GET /path\r\n" up to the stream's FIN. */
static void
read_hq_request (lsquic_stream_t *stream, struct lsquic_stream_ctx *st)
{
    ssize_t nr;
    char *p, *end;

    while ((nr = lsquic_stream_read(stream, st->req + st->req_len,
                                    sizeof(st->req) - 1 - st->req_len)) > 0)
        st->req_len += (size_t) nr;
    if (nr < 0 && (errno == EWOULDBLOCK || errno == EAGAIN))
        return;
    lsquic_stream_wantread(stream, 0);
    st->req[st->req_len] = '\0';
    if (nr < 0 || 0 != strncmp(st->req, "GET ", 4))
    {
        qir_log("bad hq-interop request");
        lsquic_stream_close(stream);
        return;
    }
    p = st->req + 4;
    end = p + strcspn(p, " \r\n");
    *end = '\0';
    snprintf(st->path, sizeof(st->path), "%s", p);
    st->have_request = 1;
    respond(stream, st);
}


static void
on_read (lsquic_stream_t *stream, lsquic_stream_ctx_t *st)
{
    if (st->srv->cfg->hq)
        read_hq_request(stream, st);
    else
        read_h3_request(stream, st);
}


static void
on_write (lsquic_stream_t *stream, lsquic_stream_ctx_t *st)
{
    struct lsquic_reader reader = { file_read, file_size, st };

    if (st->off < st->size && lsquic_stream_writef(stream, &reader) < 0)
    {
        qir_log("writing %s: %s", st->path, strerror(errno));
        lsquic_stream_close(stream);
        return;
    }
    if (st->off >= st->size)
    {
        lsquic_stream_wantwrite(stream, 0);
        lsquic_stream_shutdown(stream, 1);  /* FIN after the buffered data */
    }
}


static void
on_close (lsquic_stream_t *stream, lsquic_stream_ctx_t *st)
{
    (void) stream;
    if (st->fd >= 0)
        close(st->fd);
    free(st);
}


static const struct lsquic_stream_if s_stream_if = {
    .on_new_conn = on_new_conn,
    .on_conn_closed = on_conn_closed,
    .on_new_stream = on_new_stream,
    .on_read = on_read,
    .on_write = on_write,
    .on_close = on_close,
};


int
main (int argc, char **argv)
{
    struct qir_config cfg;
    struct lsquic_engine_settings settings;
    struct lsquic_engine_api api;
    struct sockaddr_storage sa;
    struct qir_io io;
    unsigned flags;

    if (argc > 1 && 0 == strcmp(argv[1], "--version"))
    {
        printf("%s\n", LSQUIC_VERSION_STR);
        return 0;
    }
    setvbuf(stderr, NULL, _IOLBF, 0);
    qir_config(&cfg, "server");
    qir_signals();
    if (0 != qir_parse_addr(qir_env("IP", 1), qir_env("PORT", 1), &sa))
        qir_die("IP/PORT: not an IP address and port: %s %s", getenv("IP"), getenv("PORT"));

    s_server.cfg = &cfg;
    s_server.www = qir_env("WWW", 1);
    if (0 != lsquic_global_init(LSQUIC_GLOBAL_SERVER))
        qir_die("lsquic_global_init failed");
    qir_logging_init();
    s_server.ssl_ctx = qir_ssl_ctx(&cfg, qir_env("CERTS", 1), NULL);

    flags = LSENG_SERVER | (cfg.hq ? 0 : LSENG_HTTP);
    qir_engine_settings(&settings, flags, &cfg);
    qir_io_open(&io, (struct sockaddr *) &sa, &cfg);
    io.granularity = settings.es_clock_granularity;

    memset(&api, 0, sizeof(api));
    api.ea_settings = &settings;
    api.ea_stream_if = &s_stream_if;
    api.ea_stream_if_ctx = &s_server;
    api.ea_packets_out = qir_packets_out;
    api.ea_packets_out_ctx = &io;
    api.ea_get_ssl_ctx = get_ssl_ctx;   /* no ea_lookup_cert: one certificate, SNI optional */
    if (cfg.hq)
        api.ea_alpn = QIR_ALPN_HQ;
    else
        api.ea_hsi_if = &qir_hset_if;
    io.engine = lsquic_engine_new(flags, &api);
    if (!io.engine)
        qir_die("lsquic_engine_new failed");

    qir_log("serving %s", s_server.www);
    qir_run(&io, NULL, NULL);

    qir_log("stopping");
    lsquic_engine_destroy(io.engine);
    lsquic_global_cleanup();
    return 0;
}
