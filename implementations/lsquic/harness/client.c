/*
 * client.c -- downloads every URL of $REQUESTS into $DOWNLOADS/<last path segment> over
 * HTTP/3 (h3) or HTTP/0.9 over QUIC (hq-interop): one connection per origin (in the order the
 * origins first appear), all of an origin's requests as concurrent streams on it. Exits 0 when
 * every file arrived complete (h3: status 200 and content-length bytes; hq-interop: up to the
 * stream's FIN), else 1.
 *
 * After lsquic's bin/http_client.c: requests sent from on_write, the response header set taken
 * with lsquic_stream_get_hset(), the body handed to write(2) straight from lsquic's buffers
 * with lsquic_stream_readf() (nothing is kept in memory).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qir.h"

enum dl_state { DL_PENDING, DL_ACTIVE, DL_DONE, DL_FAILED };

struct lsquic_stream_ctx     /* one download */
{
    char host[256];         /* without brackets */
    char port[8];
    char authority[300];    /* host[:port] as in the URL */
    char path[1024];
    char file[4096];        /* $DOWNLOADS/<name> */
    int origin;             /* index of its origin (first download with the same host:port) */
    enum dl_state state;
    int fd;
    int request_sent, have_headers;
    size_t request_off;     /* hq-interop: bytes of the request line written */
    int status;             /* h3 :status */
    int64_t content_length; /* -1: not sent */
    uint64_t got;
};

struct lsquic_conn_ctx      /* the connection to one origin */
{
    int origin;
    const char *cc;
    int closed;
};

static struct lsquic_stream_ctx *s_dls;
static unsigned s_n_dls;
static const struct qir_config *s_cfg;
static SSL_CTX *s_ssl_ctx;
static struct lsquic_conn_ctx s_run;    /* the connection of the origin being fetched */


static void
dl_fail (struct lsquic_stream_ctx *dl, const char *why)
{
    if (dl->state == DL_DONE || dl->state == DL_FAILED)
        return;
    qir_log("%s: %s", dl->file, why);
    dl->state = DL_FAILED;
    if (dl->fd >= 0)
    {
        close(dl->fd);
        dl->fd = -1;
    }
}


/* https://host[:port]/path -> the download's fields. */
static void
parse_url (const char *url, struct lsquic_stream_ctx *dl, const char *downloads)
{
    const char *p, *host_end, *path, *name;
    size_t hlen, plen;

    if (0 != strncmp(url, "https://", 8))
        qir_die("bad URL '%s' (not https://)", url);
    p = url + 8;
    path = p + strcspn(p, "/?#");
    if (*p == '[')
    {
        host_end = strchr(p, ']');
        if (!host_end || host_end > path)
            qir_die("bad URL '%s'", url);
        ++host_end;
    }
    else
        host_end = p + strcspn(p, ":/?#");
    hlen = (size_t) (host_end - p);
    if (hlen == 0 || hlen >= sizeof(dl->host) || (size_t) (path - p) >= sizeof(dl->authority))
        qir_die("bad URL '%s'", url);
    memcpy(dl->authority, p, (size_t) (path - p));
    dl->authority[path - p] = '\0';
    if (*p == '[')
        snprintf(dl->host, sizeof(dl->host), "%.*s", (int) hlen - 2, p + 1);
    else
        snprintf(dl->host, sizeof(dl->host), "%.*s", (int) hlen, p);
    if (*host_end == ':' && host_end + 1 < path)
        snprintf(dl->port, sizeof(dl->port), "%.*s", (int) (path - host_end - 1), host_end + 1);
    else
        strcpy(dl->port, "443");

    plen = strcspn(path, "#");
    if (plen == 0 || *path != '/')
        snprintf(dl->path, sizeof(dl->path), "/%.*s", (int) plen, path);
    else if (plen < sizeof(dl->path))
        snprintf(dl->path, sizeof(dl->path), "%.*s", (int) plen, path);
    else
        qir_die("URL path too long: '%s'", url);

    /* file name: the last segment of the path without query */
    plen = strcspn(dl->path, "?");
    name = dl->path;
    for (p = dl->path; p < dl->path + plen; ++p)
        if (*p == '/')
            name = p + 1;
    if (name == dl->path + plen || 0 == strncmp(name, "..", 2))
        snprintf(dl->file, sizeof(dl->file), "%s/index.html", downloads);
    else
        snprintf(dl->file, sizeof(dl->file), "%s/%.*s", downloads,
                 (int) (dl->path + plen - name), name);
    dl->fd = -1;
    dl->content_length = -1;
}


static SSL_CTX *
get_ssl_ctx (void *peer_ctx, const struct sockaddr *local)
{
    (void) peer_ctx;
    (void) local;
    return s_ssl_ctx;
}


static lsquic_conn_ctx_t *
on_new_conn (void *ctx, lsquic_conn_t *conn)
{
    unsigned i;
    (void) ctx;

    /* lsquic_engine_connect has just initialised (and logged) the congestion controller. */
    s_run.cc = qir_cc_take();
    qir_cc_conn_opened();
    for (i = 0; i < s_n_dls; ++i)
        if (s_dls[i].origin == s_run.origin)
            lsquic_conn_make_stream(conn);
    return &s_run;
}


static void
on_hsk_done (lsquic_conn_t *conn, enum lsquic_hsk_status status)
{
    struct lsquic_conn_ctx *c = lsquic_conn_get_ctx(conn);

    if (status == LSQ_HSK_OK || status == LSQ_HSK_RESUMED_OK)
        qir_print_negotiated(conn, c->cc);
    else
        qir_log("handshake failed");
}


static void
on_conn_closed (lsquic_conn_t *conn)
{
    struct lsquic_conn_ctx *c = lsquic_conn_get_ctx(conn);
    char status[256];
    unsigned i;

    qir_conn_status(conn, status, sizeof(status));
    qir_print_conn_info(conn);
    qir_log("connection closed (%s)", status);
    for (i = 0; i < s_n_dls; ++i)
        if (s_dls[i].origin == c->origin)
            dl_fail(&s_dls[i], "the connection closed before the download was complete");
    qir_cc_conn_closed();
    c->closed = 1;
    lsquic_conn_set_ctx(conn, NULL);
}


static void
on_conncloseframe_received (lsquic_conn_t *conn, int app_error, uint64_t error_code,
                            const char *reason, int reason_len)
{
    (void) conn;
    if (error_code != 0)
        qir_log("peer closed the connection: %s error 0x%" PRIx64 " %.*s",
                app_error == 1 ? "application" : app_error == 0 ? "transport" : "",
                error_code, reason_len, reason ? reason : "");
}


static lsquic_stream_ctx_t *
on_new_stream (void *ctx, lsquic_stream_t *stream)
{
    unsigned i;
    (void) ctx;

    if (!stream)
        return NULL;    /* the connection is going away */
    for (i = 0; i < s_n_dls; ++i)
    {
        struct lsquic_stream_ctx *dl = &s_dls[i];
        if (dl->origin != s_run.origin || dl->state != DL_PENDING)
            continue;
        dl->fd = open(dl->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (dl->fd < 0)
            qir_die("cannot create %s: %s", dl->file, strerror(errno));
        dl->state = DL_ACTIVE;
        lsquic_stream_wantwrite(stream, 1);
        return dl;
    }
    lsquic_stream_close(stream);
    return NULL;
}


static void
on_write (lsquic_stream_t *stream, lsquic_stream_ctx_t *dl)
{
    if (!s_cfg->hq)
    {
        struct qir_headers hs = { .count = 0 };
        qir_header_add(&hs, ":method", "GET");
        qir_header_add(&hs, ":scheme", "https");
        qir_header_add(&hs, ":authority", dl->authority);
        qir_header_add(&hs, ":path", dl->path);
        qir_header_add(&hs, "user-agent", "lsquic-qir/" LSQUIC_VERSION_STR);
        lsquic_http_headers_t headers = { .count = hs.count, .headers = hs.h };
        if (0 != lsquic_stream_send_headers(stream, &headers, 1))
        {
            dl_fail(dl, "cannot send the request headers");
            lsquic_stream_close(stream);
            return;
        }
    }
    else
    {
        char req[1100];
        int len = snprintf(req, sizeof(req), "GET %s\r\n", dl->path);
        ssize_t nw = lsquic_stream_write(stream, req + dl->request_off,
                                         (size_t) len - dl->request_off);
        if (nw < 0)
        {
            dl_fail(dl, "cannot send the request");
            lsquic_stream_close(stream);
            return;
        }
        dl->request_off += (size_t) nw;
        if (dl->request_off < (size_t) len)
            return;     /* on_write again */
    }
    dl->request_sent = 1;
    lsquic_stream_shutdown(stream, 1);
    lsquic_stream_wantwrite(stream, 0);
    lsquic_stream_wantread(stream, 1);
}


/* lsquic_stream_readf callback: the body goes to the file as lsquic hands it over. */
static size_t
save_body (void *ctx, const unsigned char *buf, size_t len, int fin)
{
    struct lsquic_stream_ctx *dl = ctx;
    size_t off = 0;
    ssize_t nw;

    (void) fin;
    while (off < len)
    {
        nw = write(dl->fd, buf + off, len - off);
        if (nw < 0 && errno == EINTR)
            continue;
        if (nw <= 0)
        {
            char why[300];
            snprintf(why, sizeof(why), "write: %s", nw < 0 ? strerror(errno) : "no progress");
            dl_fail(dl, why);
            return 0;
        }
        off += (size_t) nw;
    }
    dl->got += len;
    return len;
}


static void
finish (lsquic_stream_t *stream, struct lsquic_stream_ctx *dl)
{
    lsquic_conn_t *conn = lsquic_stream_conn(stream);
    unsigned i;

    if (dl->state == DL_ACTIVE)
    {
        if (dl->content_length >= 0 && (uint64_t) dl->content_length != dl->got)
        {
            char why[200];
            snprintf(why, sizeof(why), "got %" PRIu64 " bytes, content-length was %" PRId64,
                     dl->got, dl->content_length);
            dl_fail(dl, why);
        }
        else if (0 != close(dl->fd))
        {
            dl->fd = -1;
            dl_fail(dl, strerror(errno));
        }
        else
        {
            dl->fd = -1;
            dl->state = DL_DONE;
            qir_log("%" PRIu64 " bytes -> %s", dl->got, dl->file);
        }
    }
    lsquic_stream_close(stream);
    for (i = 0; i < s_n_dls; ++i)
        if (s_dls[i].origin == s_run.origin && s_dls[i].state < DL_DONE)
            return;
    lsquic_conn_close(conn);    /* every download of this origin has ended */
}


static void
on_read (lsquic_stream_t *stream, lsquic_stream_ctx_t *dl)
{
    ssize_t nr;

    if (!s_cfg->hq && !dl->have_headers)
    {
        struct qir_hset *h = lsquic_stream_get_hset(stream);
        if (!h)
        {
            dl_fail(dl, "response without headers");
            finish(stream, dl);
            return;
        }
        dl->have_headers = 1;
        dl->status = atoi(h->status);
        dl->content_length = h->content_length;
        qir_hset_destroy(h);
        if (dl->status != 200)
        {
            char why[64];
            snprintf(why, sizeof(why), "HTTP status %d", dl->status);
            dl_fail(dl, why);
            finish(stream, dl);
            return;
        }
    }
    do
        nr = lsquic_stream_readf(stream, save_body, dl);
    while (nr > 0 && dl->state == DL_ACTIVE);
    if (dl->state != DL_ACTIVE)
        finish(stream, dl);
    else if (nr == 0)
        finish(stream, dl);     /* FIN */
    else if (errno != EWOULDBLOCK && errno != EAGAIN)
    {
        char why[200];
        snprintf(why, sizeof(why), "reading the response: %s", strerror(errno));
        dl_fail(dl, why);
        finish(stream, dl);
    }
}


static void
on_reset (lsquic_stream_t *stream, lsquic_stream_ctx_t *dl, int how)
{
    (void) stream;
    /* how: 0 the server reset its sending side (RESET_STREAM), 1 it asked us to stop sending
     * (STOP_SENDING), 2 both. A server that has read the whole request may send STOP_SENDING
     * for it (quinn's h3 does so when it drops the request stream) while the response is
     * still arriving: only a reset of the response fails the download. */
    if (how == 1)
        return;
    dl_fail(dl, "the server reset the stream");
}


static void
on_close (lsquic_stream_t *stream, lsquic_stream_ctx_t *dl)
{
    (void) stream;
    if (dl)
        dl_fail(dl, "the stream closed before the response was complete");
}


static const struct lsquic_stream_if s_stream_if = {
    .on_new_conn = on_new_conn,
    .on_conn_closed = on_conn_closed,
    .on_new_stream = on_new_stream,
    .on_read = on_read,
    .on_write = on_write,
    .on_close = on_close,
    .on_hsk_done = on_hsk_done,
    .on_reset = on_reset,
    .on_conncloseframe_received = on_conncloseframe_received,
};


static int
run_closed (void *arg)
{
    return ((struct lsquic_conn_ctx *) arg)->closed;
}


/* The server's address: an IP literal, else the first address the resolver gives. */
static void
server_addr (const struct lsquic_stream_ctx *dl, struct sockaddr_storage *sa)
{
    struct addrinfo hints, *res;
    int rc;

    if (0 == qir_parse_addr(dl->host, dl->port, sa))
        return;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_DGRAM;
    rc = getaddrinfo(dl->host, dl->port, &hints, &res);
    if (rc != 0)
        qir_die("%s: %s", dl->host, gai_strerror(rc));
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
}


/* One connection to the origin of download `first', until lsquic closes it. */
static void
fetch_origin (unsigned first, const struct qir_config *cfg)
{
    const struct lsquic_stream_ctx *dl = &s_dls[first];
    struct lsquic_engine_settings settings;
    struct lsquic_engine_api api;
    struct sockaddr_storage peer, local;
    struct qir_io io;
    unsigned char ip[16];
    int is_ip = 1 == inet_pton(AF_INET, dl->host, ip) || 1 == inet_pton(AF_INET6, dl->host, ip);
    const unsigned flags = cfg->hq ? 0 : LSENG_HTTP;
    char addr[80];

    server_addr(dl, &peer);
    memset(&local, 0, sizeof(local));
    local.ss_family = peer.ss_family;
    qir_io_open(&io, (struct sockaddr *) &local, cfg);

    qir_engine_settings(&settings, flags, cfg);
    io.granularity = settings.es_clock_granularity;
    memset(&api, 0, sizeof(api));
    api.ea_settings = &settings;
    api.ea_stream_if = &s_stream_if;
    api.ea_packets_out = qir_packets_out;
    api.ea_packets_out_ctx = &io;
    api.ea_get_ssl_ctx = get_ssl_ctx;
    if (cfg->hq)
        api.ea_alpn = QIR_ALPN_HQ;
    else
        api.ea_hsi_if = &qir_hset_if;
    io.engine = lsquic_engine_new(flags, &api);
    if (!io.engine)
        qir_die("lsquic_engine_new failed");

    memset(&s_run, 0, sizeof(s_run));
    s_run.origin = (int) first;
    /* the certificate must name the host of the URL; SNI only for a name, not an IP */
    s_ssl_ctx = qir_ssl_ctx(cfg, qir_env("CERTS", 1), dl->host);
    qir_log("connecting to %s", qir_addr_str((struct sockaddr *) &peer, addr, sizeof(addr)));
    if (!lsquic_engine_connect(io.engine, LSQVER_I001, (struct sockaddr *) &io.local,
                               (struct sockaddr *) &peer, &io, NULL, is_ip ? NULL : dl->host,
                               0, NULL, 0, NULL, 0))
        qir_die("lsquic_engine_connect failed");
    qir_run(&io, run_closed, &s_run);

    lsquic_engine_destroy(io.engine);
    SSL_CTX_free(s_ssl_ctx);
    close(io.fd);
    free(io.rbuf);
}


int
main (int argc, char **argv)
{
    struct qir_config cfg;
    const char *downloads;
    char *requests, *tok, *save = NULL;
    unsigned i, j, failed = 0;

    if (argc > 1 && 0 == strcmp(argv[1], "--version"))
    {
        printf("%s\n", LSQUIC_VERSION_STR);
        return 0;
    }
    setvbuf(stderr, NULL, _IOLBF, 0);
    qir_config(&cfg, "client");
    s_cfg = &cfg;
    qir_signals();

    downloads = qir_env("DOWNLOADS", 1);
    requests = strdup(qir_env("REQUESTS", 1));
    for (tok = strtok_r(requests, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
    {
        s_dls = realloc(s_dls, (s_n_dls + 1) * sizeof(*s_dls));
        if (!s_dls)
            qir_die("out of memory");
        memset(&s_dls[s_n_dls], 0, sizeof(*s_dls));
        parse_url(tok, &s_dls[s_n_dls], downloads);
        s_dls[s_n_dls].origin = (int) s_n_dls;
        for (j = 0; j < s_n_dls; ++j)
            if (0 == strcmp(s_dls[j].host, s_dls[s_n_dls].host)
                && 0 == strcmp(s_dls[j].port, s_dls[s_n_dls].port))
            {
                s_dls[s_n_dls].origin = s_dls[j].origin;
                break;
            }
        ++s_n_dls;
    }
    if (s_n_dls == 0)
        qir_die("REQUESTS has no URL");

    if (0 != lsquic_global_init(LSQUIC_GLOBAL_CLIENT))
        qir_die("lsquic_global_init failed");
    qir_logging_init();

    for (i = 0; i < s_n_dls && !qir_stop; ++i)
        if (s_dls[i].origin == (int) i)
            fetch_origin(i, &cfg);

    for (i = 0; i < s_n_dls; ++i)
        if (s_dls[i].state != DL_DONE)
        {
            ++failed;
            if (s_dls[i].state == DL_PENDING)
                qir_log("%s: not downloaded%s", s_dls[i].file, qir_stop ? " (stopped)" : "");
        }
    lsquic_global_cleanup();
    if (failed)
    {
        qir_log("%u of %u downloads failed", failed, s_n_dls);
        return 1;
    }
    return 0;
}
