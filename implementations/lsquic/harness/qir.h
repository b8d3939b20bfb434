/*
 * qir.h -- what the lsquic server and client of the interop runner share: the contract's
 * environment, the TLS context, lsquic's log output (and the congestion controller it reports),
 * the UDP socket and the event loop.
 *
 * Modelled on lsquic's example programs (bin/prog.c, bin/test_common.c), without libevent:
 * one UDP socket, ppoll(2) and lsquic's advisory tick.
 */
#ifndef QIR_H
#define QIR_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <openssl/ssl.h>
#include <lsquic.h>
#include <lsxpack_header.h>

#define QIR_ALPN_H3 "h3"
#define QIR_ALPN_HQ "hq-interop"

/* Flow-control windows of all harnesses: 16 MiB per stream, 32 MiB per connection. */
#define QIR_STREAM_WINDOW (16u * 1024 * 1024)
#define QIR_CONN_WINDOW (32u * 1024 * 1024)

/* What the contract's environment asks for (qir_config). */
struct qir_config
{
    const char *role;       /* "server" or "client": prefix of every stderr line */
    int hq;                 /* ALPN hq-interop: lsquic engine without LSENG_HTTP */
    const char *alpn;       /* QIR_ALPN_H3 or QIR_ALPN_HQ */
    unsigned cc_algo;       /* lsquic es_cc_algo: 1 = Cubic, 2 = BBRv1 */
    uint16_t cipher;        /* TLS 1.3 suite (SSL_CIPHER_*), 0: BoringSSL's default list */
    int rcvbuf, sndbuf;     /* SO_RCVBUF/SO_SNDBUF in bytes, 0: the kernel's default */
    int gso, gro;           /* use UDP_SEGMENT / UDP_GRO where the kernel has them */
    const char *keylog;     /* SSLKEYLOGFILE or NULL */
};

extern const char *qir_role;

void qir_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void qir_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* getenv() that treats "" as unset; a missing required variable is fatal. */
const char *qir_env(const char *name, int required);

/* Fills cfg from ALPN, CONGESTION_CONTROL, CIPHER, SOCKET_*, GSO, GRO, SSLKEYLOGFILE and
 * QLOGDIR (exits on a malformed value) and prints one line with the result. */
void qir_config(struct qir_config *cfg, const char *role);

/* IP literal (IPv4 or IPv6, with or without brackets) and port -> sockaddr. */
int qir_parse_addr(const char *host, const char *port, struct sockaddr_storage *sa);
const char *qir_addr_str(const struct sockaddr *sa, char *buf, size_t len);

/* Engine settings both roles use: QUIC v1 only, the congestion controller, the windows. */
void qir_engine_settings(struct lsquic_engine_settings *s, unsigned flags,
                         const struct qir_config *cfg);

/* TLS 1.3 context: the asked cipher suite, key log, handshake report. Server (host NULL):
 * cert.pem and priv.key in certs, ALPN cfg->alpn only. Client: the server certificate is
 * verified against certs/ca.pem and must name host (an IP address or a DNS name). */
SSL_CTX *qir_ssl_ctx(const struct qir_config *cfg, const char *certs, const char *host);

/* The ALPN BoringSSL reported for the newest completed handshake (NULL: none yet). */
const char *qir_tls_alpn(void);

/* lsquic's own log output: warnings and errors go to stderr; the congestion controller is
 * taken from the lines its modules log when a connection initialises it (qir_cc_*). */
void qir_logging_init(void);

/* The congestion controller lsquic initialised for the newest connection (its log line
 * "cubic: initialized" / "bbr: initialized"), or NULL; qir_cc_take clears it. */
const char *qir_cc_take(void);
/* Count full connections: lsquic logs BBR's initialisation at debug level only, which is
 * enabled while no connection is open (its per-ACK debug lines would cost too much). */
void qir_cc_conn_opened(void);
void qir_cc_conn_closed(void);

/* One line "QIR_NEGOTIATED {...}" with the connection's ALPN (from the TLS handshake), cipher
 * (lsquic_conn_crypto_cipher) and congestion controller (NULL fields are left out). */
void qir_print_negotiated(lsquic_conn_t *conn, const char *cc);
/* lsquic_conn_status as text ("closed", "timed out: ..."); returns the status. */
enum LSQUIC_CONN_STATUS qir_conn_status(lsquic_conn_t *conn, char *buf, size_t len);
/* One line with lsquic's counters of a connection (lsquic_conn_get_info). */
void qir_print_conn_info(lsquic_conn_t *conn);

/* The UDP socket and the event loop */
struct qir_io
{
    int fd;
    struct sockaddr_storage local;
    lsquic_engine_t *engine;
    int gso, gro;           /* in use (asked for and offered by the kernel) */
    int want_write;         /* the socket said EAGAIN: wait for POLLOUT */
    unsigned granularity;   /* es_clock_granularity, microseconds */
    unsigned char *rbuf;    /* receive buffer (64 KiB: one GRO batch) */
};

/* Opens the socket bound to bind_sa with the asked buffers, GSO and GRO; prints what it got. */
void qir_io_open(struct qir_io *io, const struct sockaddr *bind_sa, const struct qir_config *cfg);

/* ea_packets_out: sendmmsg(2), consecutive equal-sized datagrams to one peer as one UDP_SEGMENT
 * (GSO) message when io->gso. */
int qir_packets_out(void *io, const struct lsquic_out_spec *specs, unsigned n_specs);

/* SIGTERM and SIGINT set this; qir_run returns. */
extern volatile sig_atomic_t qir_stop;
void qir_signals(void);

/* Runs the engine until qir_stop is set or done(arg) returns true. */
void qir_run(struct qir_io *io, int (*done)(void *), void *arg);

/* Header sets (ea_hsi_if): the decoded header fields of one HTTP/3 message. */
struct qir_hset
{
    char status[4];         /* :status */
    char path[1024];        /* :path */
    int64_t content_length; /* -1: not sent */
    struct lsxpack_header xhdr;
    char buf[4096];         /* decode buffer of the current field */
};
extern const struct lsquic_hset_if qir_hset_if;
void qir_hset_destroy(void *hset);

/* Fills an lsxpack_header array from name/value strings kept in buf. */
struct qir_headers
{
    struct lsxpack_header h[8];
    char buf[2048];
    size_t off;
    int count;
};
int qir_header_add(struct qir_headers *hs, const char *name, const char *value);

#endif
