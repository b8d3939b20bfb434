/*
 * qir.c -- the contract's environment, lsquic's engine settings and log output, the
 * QIR_NEGOTIATED line; shared by server.c and client.c (see qir.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qir.h"

const char *qir_role = "?";

/* ------------------------------------------------------------------ messages */

static void
qir_vlog (const char *fmt, va_list ap)
{
    fprintf(stderr, "lsquic %s: ", qir_role);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}


void
qir_log (const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    qir_vlog(fmt, ap);
    va_end(ap);
}


void
qir_die (const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    qir_vlog(fmt, ap);
    va_end(ap);
    exit(1);
}


const char *
qir_env (const char *name, int required)
{
    const char *v = getenv(name);
    if (v && *v)
        return v;
    if (required)
        qir_die("%s is not set", name);
    return NULL;
}

/* ------------------------------------------------------------------ configuration */

static int
env_bytes (const char *name)
{
    const char *v = qir_env(name, 0);
    char *end;
    long long n;

    if (!v)
        return 0;
    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno || *end || n <= 0 || n > 1024LL * 1024 * 1024)
        qir_die("%s: not a size in bytes: '%s'", name, v);
    return (int) n;
}


static int
env_flag (const char *name)
{
    const char *v = qir_env(name, 0);
    if (!v || 0 == strcmp(v, "1"))
        return 1;
    if (0 == strcmp(v, "0"))
        return 0;
    qir_die("%s must be 0 or 1, not '%s'", name, v);
}


void
qir_config (struct qir_config *cfg, const char *role)
{
    const char *alpn, *cc, *cipher;

    memset(cfg, 0, sizeof(*cfg));
    cfg->role = qir_role = role;

    alpn = qir_env("ALPN", 0);
    if (!alpn || 0 == strcmp(alpn, QIR_ALPN_H3))
        cfg->alpn = QIR_ALPN_H3;
    else if (0 == strcmp(alpn, QIR_ALPN_HQ))
    {
        cfg->alpn = QIR_ALPN_HQ;
        cfg->hq = 1;
    }
    else
        qir_die("unsupported ALPN '%s'", alpn);

    /* lsquic offers Cubic, BBRv1 and "adaptive" (BBRv1 until the first RTT sample, then
     * Cubic below 1.5 ms, else BBR); it has no Reno. The contract's default is cubic. */
    cc = qir_env("CONGESTION_CONTROL", 0);
    if (!cc || 0 == strcmp(cc, "cubic"))
        cfg->cc_algo = 1;
    else if (0 == strcmp(cc, "bbr"))
        cfg->cc_algo = 2;
    else
    {
        qir_log("congestion control '%s' not offered by lsquic, using cubic", cc);
        cfg->cc_algo = 1;
    }

    cipher = qir_env("CIPHER", 0);
    if (!cipher)
        cfg->cipher = 0;
    else if (0 == strcmp(cipher, "TLS_AES_128_GCM_SHA256"))
        cfg->cipher = SSL_CIPHER_AES_128_GCM_SHA256;
    else if (0 == strcmp(cipher, "TLS_AES_256_GCM_SHA384"))
        cfg->cipher = SSL_CIPHER_AES_256_GCM_SHA384;
    else if (0 == strcmp(cipher, "TLS_CHACHA20_POLY1305_SHA256"))
        cfg->cipher = SSL_CIPHER_CHACHA20_POLY1305_SHA256;
    else
        qir_die("unsupported CIPHER '%s'", cipher);

    cfg->rcvbuf = env_bytes("SOCKET_RCVBUF");
    cfg->sndbuf = env_bytes("SOCKET_SNDBUF");
    cfg->gso = env_flag("GSO");
    cfg->gro = env_flag("GRO");
    cfg->keylog = qir_env("SSLKEYLOGFILE", 0);
    if (qir_env("QLOGDIR", 0))
        qir_log("QLOGDIR ignored: lsquic writes no qlog files (its \"qlog\" log module is a "
                "pre-standard format inside the debug log)");

    qir_log("lsquic %s, ALPN %s, congestion control %s, cipher %s, GSO %d, GRO %d%s",
            LSQUIC_VERSION_STR, cfg->alpn, cfg->cc_algo == 2 ? "bbr" : "cubic",
            cipher ? cipher : "(BoringSSL default)", cfg->gso, cfg->gro,
            cfg->keylog ? ", key log" : "");
}

/* ------------------------------------------------------------------ addresses */

int
qir_parse_addr (const char *host, const char *port, struct sockaddr_storage *sa)
{
    char h[INET6_ADDRSTRLEN + 2];
    size_t len = strlen(host);
    char *end;
    unsigned long p;

    errno = 0;
    p = strtoul(port, &end, 10);
    if (errno || *end || p == 0 || p > 65535)
        return -1;
    if (len >= 2 && host[0] == '[' && host[len - 1] == ']')
    {
        host += 1;
        len -= 2;
    }
    if (len >= sizeof(h))
        return -1;
    memcpy(h, host, len);
    h[len] = '\0';

    memset(sa, 0, sizeof(*sa));
    struct sockaddr_in *sin = (struct sockaddr_in *) sa;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) sa;
    if (1 == inet_pton(AF_INET, h, &sin->sin_addr))
    {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t) p);
        return 0;
    }
    if (1 == inet_pton(AF_INET6, h, &sin6->sin6_addr))
    {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t) p);
        return 0;
    }
    return -1;
}


const char *
qir_addr_str (const struct sockaddr *sa, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET)
    {
        const struct sockaddr_in *sin = (const void *) sa;
        inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
        snprintf(buf, len, "%s:%u", ip, ntohs(sin->sin_port));
    }
    else
    {
        const struct sockaddr_in6 *sin6 = (const void *) sa;
        inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip));
        snprintf(buf, len, "[%s]:%u", ip, ntohs(sin6->sin6_port));
    }
    return buf;
}

/* ------------------------------------------------------------------ engine settings */

/* The client's fixed flow-control window (FLOW_CONTROL_WINDOW, bytes), 0 where unset. lsquic's
 * windows are unsigned: a larger one cannot be honoured (exit 127). */
static unsigned
flow_control_window (void)
{
    const char *v = qir_env("FLOW_CONTROL_WINDOW", 0);
    char *end;
    unsigned long long n;

    if (!v)
        return 0;
    errno = 0;
    n = strtoull(v, &end, 10);
    if (errno || *end || n == 0)
        qir_die("FLOW_CONTROL_WINDOW: not a size in bytes: '%s'", v);
    if (n > UINT_MAX)
    {
        qir_log("unsupported FLOW_CONTROL_WINDOW=%s: lsquic's windows take at most %u bytes",
                v, UINT_MAX);
        exit(127);
    }
    return (unsigned) n;
}


void
qir_engine_settings (struct lsquic_engine_settings *s, unsigned flags,
                     const struct qir_config *cfg)
{
    unsigned window = 0;

    char err[256];

    lsquic_engine_init_settings(s, flags);
    /* QUIC v1 only (lsquic's client would otherwise start with the highest version it
     * knows); h3 and hq-interop are the v1 ALPNs. */
    s->es_versions = 1u << LSQVER_I001;
    s->es_cc_algo = cfg->cc_algo;
    /* Windows as in the other harnesses, auto-tuned up to the same values. */
    s->es_init_max_data = QIR_CONN_WINDOW;
    s->es_init_max_stream_data_bidi_local = QIR_STREAM_WINDOW;
    s->es_init_max_stream_data_bidi_remote = QIR_STREAM_WINDOW;
    s->es_max_cfcw = QIR_CONN_WINDOW;
    s->es_max_sfcw = QIR_STREAM_WINDOW;
    s->es_cfcw = QIR_CONN_WINDOW;
    s->es_sfcw = QIR_STREAM_WINDOW;
    /* The client's fixed window: the initial and the largest the same, so the auto-tuning
     * (lsquic_sfcw.c, up to es_max_sfcw / es_max_cfcw) cannot grow it. */
    if (0 == strcmp(cfg->role, "client"))
        window = flow_control_window();
    if (window)
    {
        s->es_init_max_data = s->es_max_cfcw = s->es_cfcw = window;
        s->es_init_max_stream_data_bidi_local = s->es_init_max_stream_data_bidi_remote = window;
        s->es_max_sfcw = s->es_sfcw = window;
        qir_log("flow-control window fixed at %u bytes (connection and streams)", window);
    }
    /* No Retry: with es_support_srej a server answers a ClientHello split over several
     * Initial packets (OpenSSL 3.5's with its post-quantum key share) with a Retry when the
     * first tick sees only its first packet, and curl's connection then stalled (1 of 3 runs).
     * The other servers here do not retry either (nginx: quic_retry off). */
    s->es_support_srej = 0;
    if (0 != lsquic_engine_check_settings(s, flags, err, sizeof(err)))
        qir_die("invalid engine settings: %s", err);
}

/* ------------------------------------------------------------------ lsquic's log */

static const char *s_cc;        /* congestion controller lsquic logged, not yet taken */
static unsigned s_n_conns;      /* open full connections */


/* lsquic's log lines look like
 * "HH:MM:SS.uuuuuu [LEVEL] [QUIC:<CID>-<stream>] <module>: <message>\n". */
static int
log_buf (void *ctx, const char *buf, size_t len)
{
    const char *level = memchr(buf, '[', len);

    (void) ctx;
    if (!level)
        level = buf;
    if (strstr(buf, "] cubic: initialized"))
        s_cc = "cubic";
    else if (strstr(buf, "] bbr: initialized"))
    {
        s_cc = "bbr";
        /* Back to info level: BBR logs every ACK at debug level. */
        lsquic_logger_lopt("bbr=info");
    }
    else if (0 == strncmp(level, "[DEBUG]", 7) || 0 == strncmp(level, "[INFO]", 6))
        return (int) len;   /* other lines of the modules raised to see the above */
    fprintf(stderr, "lsquic %s: %.*s", qir_role, (int) len, buf);
    return (int) len;
}


static const struct lsquic_logger_if s_logger_if = { .log_buf = log_buf, };


void
qir_logging_init (void)
{
    lsquic_logger_init(&s_logger_if, NULL, LLTS_HHMMSSUS);
    lsquic_set_log_level("warn");
    /* Cubic logs its initialisation at info level, BBR at debug level. */
    lsquic_logger_lopt("cubic=info,bbr=debug");
}


const char *
qir_cc_take (void)
{
    const char *cc = s_cc;
    s_cc = NULL;
    return cc;
}


void
qir_cc_conn_opened (void)
{
    ++s_n_conns;
}


void
qir_cc_conn_closed (void)
{
    if (s_n_conns > 0 && --s_n_conns == 0)
        lsquic_logger_lopt("bbr=debug");
}


void
qir_print_negotiated (lsquic_conn_t *conn, const char *cc)
{
    const char *cipher = lsquic_conn_crypto_cipher(conn);
    const char *keys[3] = { "alpn", "cipher", "congestion_control" };
    const char *vals[3] = { qir_tls_alpn(), cipher, cc };
    int i, n = 0;

    /* The values are plain ASCII names (ALPN, IANA suite names); escape anyway. */
    fputs("QIR_NEGOTIATED {", stderr);
    for (i = 0; i < 3; ++i)
    {
        const char *p;
        if (!vals[i])
            continue;
        fprintf(stderr, "%s\"%s\": \"", n++ ? ", " : "", keys[i]);
        for (p = vals[i]; *p; ++p)
            if (*p == '"' || *p == '\\')
                fprintf(stderr, "\\%c", *p);
            else if ((unsigned char) *p < 0x20 || (unsigned char) *p > 0x7e)
                fprintf(stderr, "\\u%04x", (unsigned char) *p);
            else
                fputc(*p, stderr);
        fputc('"', stderr);
    }
    fputs("}\n", stderr);
}


enum LSQUIC_CONN_STATUS
qir_conn_status (lsquic_conn_t *conn, char *buf, size_t len)
{
    static const char *const names[] = {
        [LSCONN_ST_HSK_IN_PROGRESS] = "handshake in progress",
        [LSCONN_ST_CONNECTED] = "connected",
        [LSCONN_ST_HSK_FAILURE] = "handshake failed",
        [LSCONN_ST_GOING_AWAY] = "going away",
        [LSCONN_ST_TIMED_OUT] = "timed out",
        [LSCONN_ST_RESET] = "reset",
        [LSCONN_ST_USER_ABORTED] = "aborted",
        [LSCONN_ST_ERROR] = "error",
        [LSCONN_ST_CLOSED] = "closed",
        [LSCONN_ST_PEER_GOING_AWAY] = "peer going away",
        [LSCONN_ST_VERNEG_FAILURE] = "version negotiation failed",
    };
    char err[200] = "";
    enum LSQUIC_CONN_STATUS st = lsquic_conn_status(conn, err, sizeof(err));
    const char *name = (unsigned) st < sizeof(names) / sizeof(names[0]) && names[st]
                     ? names[st] : "unknown";

    snprintf(buf, len, "%s%s%s", name, err[0] ? ": " : "", err);
    return st;
}


void
qir_print_conn_info (lsquic_conn_t *conn)
{
    struct lsquic_conn_info info;

    if (0 != lsquic_conn_get_info(conn, &info))
        return;
    qir_log("connection: sent %llu bytes in %llu packets (%llu lost, %llu retransmitted), "
            "received %llu bytes in %llu packets, srtt %u us, min rtt %u us, cwnd %u, "
            "pmtu %u",
            (unsigned long long) info.lci_bytes_sent, (unsigned long long) info.lci_pkts_sent,
            (unsigned long long) info.lci_pkts_lost, (unsigned long long) info.lci_pkts_retx,
            (unsigned long long) info.lci_bytes_rcvd, (unsigned long long) info.lci_pkts_rcvd,
            info.lci_rtt, info.lci_rtt_min, info.lci_cwnd, info.lci_pmtu);
}
