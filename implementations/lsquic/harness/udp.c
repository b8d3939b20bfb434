/*
 * udp.c -- the UDP socket (buffers, GSO, GRO), ea_packets_out and the event loop around
 * lsquic's engine, after lsquic's bin/prog.c and bin/test_common.c (see qir.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "qir.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define QIR_GSO_MAX_SEGS 64        /* the kernel's UDP_MAX_SEGMENTS */
#define QIR_GSO_MAX_BYTES 65000    /* below the 64 KiB a UDP datagram can carry */
#define QIR_MAX_MSGS 64            /* messages per sendmmsg */
#define QIR_MAX_IOV 1024           /* UIO_MAXIOV */
#define QIR_RECV_BUF 65536
#define QIR_RECV_BATCH 64          /* datagrams read before lsquic processes them */

volatile sig_atomic_t qir_stop;

/* ------------------------------------------------------------------ UDP socket */

void
qir_io_open (struct qir_io *io, const struct sockaddr *bind_sa, const struct qir_config *cfg)
{
    socklen_t len = bind_sa->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                  : sizeof(struct sockaddr_in6);
    int on = 1, val;
    socklen_t vlen;
    char addr[80];

    memset(io, 0, sizeof(*io));
    io->fd = socket(bind_sa->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (io->fd < 0)
        qir_die("socket: %s", strerror(errno));
    if (cfg->rcvbuf && 0 != setsockopt(io->fd, SOL_SOCKET, SO_RCVBUF, &cfg->rcvbuf,
                                       sizeof(cfg->rcvbuf)))
        qir_die("SO_RCVBUF: %s", strerror(errno));
    if (cfg->sndbuf && 0 != setsockopt(io->fd, SOL_SOCKET, SO_SNDBUF, &cfg->sndbuf,
                                       sizeof(cfg->sndbuf)))
        qir_die("SO_SNDBUF: %s", strerror(errno));
    if (0 != bind(io->fd, bind_sa, len))
        qir_die("bind %s: %s", qir_addr_str(bind_sa, addr, sizeof(addr)), strerror(errno));
    len = sizeof(io->local);
    if (0 != getsockname(io->fd, (struct sockaddr *) &io->local, &len))
        qir_die("getsockname: %s", strerror(errno));

    /* GSO: the kernel has it when it knows the UDP_SEGMENT option. */
    vlen = sizeof(val);
    io->gso = cfg->gso && 0 == getsockopt(io->fd, SOL_UDP, UDP_SEGMENT, &val, &vlen);
    io->gro = cfg->gro && 0 == setsockopt(io->fd, SOL_UDP, UDP_GRO, &on, sizeof(on));

    io->rbuf = malloc(QIR_RECV_BUF);
    if (!io->rbuf)
        qir_die("out of memory");

    int rcv = 0, snd = 0;
    vlen = sizeof(rcv);
    getsockopt(io->fd, SOL_SOCKET, SO_RCVBUF, &rcv, &vlen);
    vlen = sizeof(snd);
    getsockopt(io->fd, SOL_SOCKET, SO_SNDBUF, &snd, &vlen);
    qir_log("UDP socket %s: SO_RCVBUF %d, SO_SNDBUF %d (kernel values), GSO %s, GRO %s",
            qir_addr_str((struct sockaddr *) &io->local, addr, sizeof(addr)), rcv, snd,
            io->gso ? "on" : cfg->gso ? "not available" : "off",
            io->gro ? "on" : cfg->gro ? "not available" : "off");
}


static size_t
spec_size (const struct lsquic_out_spec *spec)
{
    size_t i, sz = 0;
    for (i = 0; i < spec->iovlen; ++i)
        sz += spec->iov[i].iov_len;
    return sz;
}


static int
same_addr (const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return 0;
    if (a->sa_family == AF_INET)
        return 0 == memcmp(a, b, sizeof(struct sockaddr_in));
    return 0 == memcmp(a, b, sizeof(struct sockaddr_in6));
}


struct qir_cmsg
{
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } u;
};


int
qir_packets_out (void *ctx, const struct lsquic_out_spec *specs, unsigned n_specs)
{
    struct qir_io *const io = ctx;
    struct mmsghdr msgs[QIR_MAX_MSGS];
    struct qir_cmsg cmsgs[QIR_MAX_MSGS];
    unsigned first[QIR_MAX_MSGS + 1];   /* index of the first spec of each message */
    struct iovec iov[QIR_MAX_IOV];
    unsigned done = 0;

    while (done < n_specs)
    {
        unsigned m = 0, i = done, niov = 0;
        int sent, k;

        /* Messages: one datagram each, or with GSO a run of datagrams of one size (the last
         * may be shorter) to the same peer, sent as one buffer cut by the kernel. */
        while (i < n_specs && m < QIR_MAX_MSGS && niov + specs[i].iovlen <= QIR_MAX_IOV)
        {
            const size_t seg = spec_size(&specs[i]);
            size_t total = 0, sz;
            unsigned j = i, nseg = 0, iov0 = niov;

            while (j < n_specs && niov + specs[j].iovlen <= QIR_MAX_IOV)
            {
                sz = spec_size(&specs[j]);
                if (j > i && (!io->gso || nseg >= QIR_GSO_MAX_SEGS || sz > seg
                              || total + sz > QIR_GSO_MAX_BYTES
                              || !same_addr(specs[j].dest_sa, specs[i].dest_sa)))
                    break;
                memcpy(&iov[niov], specs[j].iov, specs[j].iovlen * sizeof(iov[0]));
                niov += specs[j].iovlen;
                total += sz;
                ++nseg;
                ++j;
                if (sz < seg)
                    break;
            }
            memset(&msgs[m], 0, sizeof(msgs[m]));
            msgs[m].msg_hdr.msg_name = (void *) specs[i].dest_sa;
            msgs[m].msg_hdr.msg_namelen = specs[i].dest_sa->sa_family == AF_INET
                            ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
            msgs[m].msg_hdr.msg_iov = &iov[iov0];
            msgs[m].msg_hdr.msg_iovlen = niov - iov0;
            if (nseg > 1)
            {
                struct cmsghdr *cm;
                msgs[m].msg_hdr.msg_control = cmsgs[m].u.buf;
                msgs[m].msg_hdr.msg_controllen = sizeof(cmsgs[m].u.buf);
                cm = CMSG_FIRSTHDR(&msgs[m].msg_hdr);
                cm->cmsg_level = SOL_UDP;
                cm->cmsg_type = UDP_SEGMENT;
                cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
                *(uint16_t *) CMSG_DATA(cm) = (uint16_t) seg;
            }
            first[m++] = i;
            i = j;
        }
        first[m] = i;

        for (k = 0; k < (int) m; k += sent)
        {
            sent = sendmmsg(io->fd, &msgs[k], m - k, 0);
            if (sent > 0)
                continue;
            if (errno == EINTR)
            {
                sent = 0;
                continue;
            }
            if (errno == EIO && io->gso && first[k + 1] - first[k] > 1)
            {
                /* The device cannot segment: send single datagrams from here on. */
                qir_log("sendmmsg with UDP_SEGMENT failed (EIO): GSO switched off");
                io->gso = 0;
                done = first[k];
                goto next_round;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
            {
                io->want_write = 1;
                errno = EAGAIN;
            }
            /* Anything else: lsquic closes the connection of this packet. */
            return first[k] > 0 ? (int) first[k] : -1;
        }
        done = i;
  next_round:
        ;
    }
    return (int) n_specs;
}

/* ------------------------------------------------------------------ event loop */

static void
on_signal (int sig)
{
    (void) sig;
    qir_stop = 1;
}


void
qir_signals (void)
{
    struct sigaction sa;
    sigset_t block;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Blocked except inside ppoll, so a signal cannot slip in between the check of
     * qir_stop and the wait. */
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, NULL);
}


/* Reads everything the socket has, QIR_RECV_BATCH datagrams (GRO: batches of them) at a
 * time, each followed by lsquic_engine_process_conns as in lsquic's read_handler. */
static void
read_packets (struct qir_io *io)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct sockaddr_storage peer;
    struct iovec iov;
    struct msghdr msg;
    struct cmsghdr *cm;
    unsigned n_read;
    ssize_t nr, off;
    int seg;

    for (;;)
    {
        for (n_read = 0; n_read < QIR_RECV_BATCH; ++n_read)
        {
            iov.iov_base = io->rbuf;
            iov.iov_len = QIR_RECV_BUF;
            memset(&msg, 0, sizeof(msg));
            msg.msg_name = &peer;
            msg.msg_namelen = sizeof(peer);
            msg.msg_iov = &iov;
            msg.msg_iovlen = 1;
            msg.msg_control = ctl.buf;
            msg.msg_controllen = sizeof(ctl.buf);
            nr = recvmsg(io->fd, &msg, 0);
            if (nr < 0)
            {
                if (errno == EINTR)
                    continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                    qir_log("recvmsg: %s", strerror(errno));
                if (n_read > 0)
                    lsquic_engine_process_conns(io->engine);
                return;
            }
            seg = (int) nr;
            for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
                if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO)
                    memcpy(&seg, CMSG_DATA(cm), sizeof(seg));
            if (seg <= 0)
                seg = (int) nr;
            for (off = 0; off < nr; off += seg)
                (void) lsquic_engine_packet_in(io->engine, io->rbuf + off,
                        nr - off < seg ? (size_t) (nr - off) : (size_t) seg,
                        (struct sockaddr *) &io->local, (struct sockaddr *) &peer, io, 0);
        }
        lsquic_engine_process_conns(io->engine);
    }
}


void
qir_run (struct qir_io *io, int (*done)(void *), void *arg)
{
    sigset_t unblocked;
    struct pollfd pfd;
    struct timespec ts, *tsp;
    int diff, r;

    sigprocmask(SIG_SETMASK, NULL, &unblocked);
    sigdelset(&unblocked, SIGTERM);
    sigdelset(&unblocked, SIGINT);

    lsquic_engine_process_conns(io->engine);
    while (!qir_stop && !(done && done(arg)))
    {
        /* lsquic's next tick; a tick due within the clock granularity waits for one
         * granularity, as in lsquic's prog_process_conns. */
        tsp = NULL;
        if (lsquic_engine_earliest_adv_tick(io->engine, &diff))
        {
            if (diff < 0 || (unsigned) diff < io->granularity)
                diff = (int) io->granularity;
            ts.tv_sec = diff / 1000000;
            ts.tv_nsec = (long) (diff % 1000000) * 1000;
            tsp = &ts;
        }
        pfd.fd = io->fd;
        pfd.events = POLLIN | (io->want_write ? POLLOUT : 0);
        pfd.revents = 0;
        r = ppoll(&pfd, 1, tsp, &unblocked);
        if (r < 0)
        {
            if (errno == EINTR)
                continue;
            qir_die("ppoll: %s", strerror(errno));
        }
        if (r == 0)
        {
            lsquic_engine_process_conns(io->engine);
            continue;
        }
        if (pfd.revents & POLLOUT)
        {
            io->want_write = 0;
            lsquic_engine_send_unsent_packets(io->engine);
        }
        if (pfd.revents & (POLLIN | POLLERR))
            read_packets(io);
    }
}
