/*
 * tls.c -- the BoringSSL context lsquic creates its SSL objects from (ea_get_ssl_ctx): TLS 1.3
 * with the asked cipher suite, the key log, ALPN, certificates (see qir.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include "qir.h"

static FILE *s_keylog;
static char s_hsk_alpn[64];     /* ALPN of the newest completed handshake */


const char *
qir_tls_alpn (void)
{
    return s_hsk_alpn[0] ? s_hsk_alpn : NULL;
}


static void
keylog_line (const SSL *ssl, const char *line)
{
    (void) ssl;
    fprintf(s_keylog, "%s\n", line);
    fflush(s_keylog);
}


/* BoringSSL's reports: a fatal alert it sends (logged, a client's with the verdict of the
 * certificate check) and a completed handshake, whose negotiated ALPN is kept for the
 * QIR_NEGOTIATED line (printed once lsquic's full connection exists: it has the cipher and the
 * congestion controller). */
static void
info_cb (const SSL *ssl, int where, int ret)
{
    const unsigned char *alpn;
    unsigned len;

    if ((where & SSL_CB_WRITE_ALERT) && (ret >> 8) == SSL3_AL_FATAL)
    {
        long vr = SSL_is_server(ssl) ? X509_V_OK : SSL_get_verify_result(ssl);
        qir_log("sending TLS alert: %s%s%s", SSL_alert_desc_string_long(ret),
                vr != X509_V_OK ? "; certificate check: " : "",
                vr != X509_V_OK ? X509_verify_cert_error_string(vr) : "");
    }
    if (!(where & SSL_CB_HANDSHAKE_DONE))
        return;
    SSL_get0_alpn_selected(ssl, &alpn, &len);
    if (len >= sizeof(s_hsk_alpn))
        len = sizeof(s_hsk_alpn) - 1;
    memcpy(s_hsk_alpn, alpn, len);
    s_hsk_alpn[len] = '\0';
}


/* Server: select the one ALPN this server speaks, else no_application_protocol. */
static int
alpn_select_cb (SSL *ssl, const unsigned char **out, unsigned char *outlen,
                const unsigned char *in, unsigned inlen, void *arg)
{
    const char *want = arg;
    size_t wlen = strlen(want);
    unsigned i;

    (void) ssl;
    for (i = 0; i < inlen; i += 1 + in[i])
        if (in[i] == wlen && i + 1 + wlen <= inlen && 0 == memcmp(in + i + 1, want, wlen))
        {
            *out = in + i + 1;
            *outlen = in[i];
            return SSL_TLSEXT_ERR_OK;
        }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}


static void
ssl_die (const char *what)
{
    char buf[256];
    ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
    qir_die("%s: %s", what, buf);
}


/* Client: the name or IP address the server certificate must carry. BoringSSL has no way to
 * unset a name once set (a NULL name poisons the parameters, which then silently check
 * nothing), hence one context per server. */
static void
expect_host (SSL_CTX *ctx, const char *host)
{
    X509_VERIFY_PARAM *param = SSL_CTX_get0_param(ctx);
    unsigned char ip[16];
    int ok;

    if (1 == inet_pton(AF_INET, host, ip) || 1 == inet_pton(AF_INET6, host, ip))
        ok = X509_VERIFY_PARAM_set1_ip_asc(param, host);
    else
        ok = X509_VERIFY_PARAM_set1_host(param, host, strlen(host));
    if (!ok)
        ssl_die("cannot set the expected server name");
}


SSL_CTX *
qir_ssl_ctx (const struct qir_config *cfg, const char *certs, const char *host)
{
    const int server = host == NULL;
    char path[4096];
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());

    if (!ctx)
        ssl_die("SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    /* The one TLS 1.3 suite asked for: BoringSSL's server picks from this list only, its
     * client offers only it. Without CIPHER: BoringSSL's default order (AES-GCM first with
     * AES hardware, else ChaCha20 first). */
    if (cfg->cipher && !SSL_CTX_set1_tls13_ciphers(ctx, &cfg->cipher, NULL, 1))
        ssl_die("SSL_CTX_set1_tls13_ciphers");
    SSL_CTX_set_info_callback(ctx, info_cb);
    if (cfg->keylog)
    {
        if (!s_keylog && !(s_keylog = fopen(cfg->keylog, "a")))
            qir_die("cannot open SSLKEYLOGFILE %s: %s", cfg->keylog, strerror(errno));
        SSL_CTX_set_keylog_callback(ctx, keylog_line);
    }

    if (server)
    {
        snprintf(path, sizeof(path), "%s/cert.pem", certs);
        if (1 != SSL_CTX_use_certificate_chain_file(ctx, path))
            ssl_die(path);
        snprintf(path, sizeof(path), "%s/priv.key", certs);
        if (1 != SSL_CTX_use_PrivateKey_file(ctx, path, SSL_FILETYPE_PEM))
            ssl_die(path);
        if (1 != SSL_CTX_check_private_key(ctx))
            ssl_die("certificate and key do not match");
        SSL_CTX_set_alpn_select_cb(ctx, alpn_select_cb, (void *) cfg->alpn);
    }
    else
    {
        snprintf(path, sizeof(path), "%s/ca.pem", certs);
        if (1 != SSL_CTX_load_verify_locations(ctx, path, NULL))
            ssl_die(path);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        expect_host(ctx, host);
    }
    return ctx;
}
