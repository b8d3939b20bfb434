/* qir-delayline: a delay line on one NFQUEUE queue (the path's router of the testbed).
 *
 * Build (on the router node; Debian package libnetfilter-queue-dev):
 *   gcc -O2 -Wall -Wextra -Werror -o qir-delayline delayline.c -lnetfilter_queue -lm
 *
 * Why it exists: the kernel of the testbed has no netem, so delay, jitter, random loss,
 * rate limits with their own buffers (two links: dual connectivity) and a time-varying rate
 * (mahimahi traces) are made here, in user space. iptables rules (set by someone else) send the
 * forwarded packets to queue N; this program holds each packet and issues its verdict
 * (NF_ACCEPT or NF_DROP) when the model says it leaves. Verdicts go by packet id and may be out
 * of order, so the packet itself never comes back to user space: only its first 128 bytes are
 * copied (for its size, flow and the per-packet log).
 *
 * Usage:
 *   qir-delayline --queue N [--stats FILE] [--log FILE] [--seed N] [--rt-priority P]
 *     single link: [--delay MS] [--jitter CV] [--loss P]
 *     two links:   --link rate=BITS_PER_S,delay=MS,jitter=CV,loss=P,buffer=BYTES (twice)
 *                  [--batch N] [--ratio A:B] [--reorder-timeout MS] [--pin PORT=LINK]...
 *     trace:       --trace FILE --trace-buffer BYTES [--delay MS] [--jitter CV] [--loss P]
 * Two links: the packets are split in batches (N packets, A batches on link 0, then B on link
 * 1); with --reorder-timeout they are put back in sequence at the far end (PDCP-like), a gap
 * given up after MS. --pin PORT=LINK (repeatable; LINK 0 or 1): a TCP or UDP packet (IPv4 or
 * IPv6) whose source port, or else destination port, is PORT always takes LINK (one flow per
 * link, next to the split one). Pinned packets are not part of the split: the batches and the
 * sequence of the reordering count only the others, and a pinned packet goes as soon as it
 * reaches the far end (a link is FIFO; only its jitter reorders it). IPv6 extension headers
 * are not followed and IPv4 fragments after the first carry no ports: such packets are split.
 * Bad input: one line on stderr, exit 2, before anything is bound. A failure at run time (the
 * queue is bound by another process, the socket fails): one line, exit 1. SIGTERM/SIGINT:
 * every held packet is accepted at once, the stats are written, exit 0. SIGUSR1: stats now.
 * Once bound, "ready queue=N" is printed on stdout.
 * Two corrections keep a packet's delay what the model says on a host whose wake-ups are late
 * (a VM's timers, a busy host; docs/paths.md, "A busy host"): a packet's arrival is the
 * kernel's timestamp of it (NFQA_TIMESTAMP, which a socket holding SO_TIMESTAMPNS makes the
 * kernel take), not the moment the delay line read it; and a release wakes early by the
 * mean lateness of the timer wake-ups seen so far (at most WAKE_LEAD_MAX_NS), so releases
 * are on time on average instead of late by it ("read_late_mean_us", "wake_lead_us",
 * "early_mean_us" in the stats).
 * --rt-priority P (1..99; 0, the default: not asked): run at SCHED_FIFO priority P, so that a
 * busy host's other work cannot make the releases late (docs/paths.md, "A busy host"). Where
 * the kernel refuses it (no CAP_SYS_NICE, an RT budget of 0 in the cgroup), one line on
 * stderr and the delay line runs on at the default policy; the stats say which it got
 * ("sched", "rt_priority", "sched_error").
 *
 * Netlink is spoken directly (a raw NETLINK_NETFILTER socket and the nfq_nlmsg_* message
 * builders of libnetfilter_queue) rather than through nfq_open/nfq_handle_packet: that API
 * hides NFQA_CAP_LEN (the true length of a packet whose copy was cut at 128 bytes) and sends
 * one verdict per system call; here the verdicts due at one instant go out in one sendto().
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#define PROG "qir-delayline"
#define COPY_RANGE 128              /* bytes of each packet copied to us: IP + TCP/UDP ports */
#define KERNEL_QUEUE_MAXLEN 65536   /* packets the kernel may hold for us at once */
#define RCVBUF_BYTES (32 << 20)     /* socket buffer: a burst of arrivals while we are busy */
#define RECV_BATCH 64               /* messages per recvmmsg() */
#define RECV_BUF_BYTES 2048         /* one message: 128 copied bytes + the attributes */
#define DRAIN_MAX 1024              /* packets read per wake-up before timers get a turn */
#define VERDICT_BUF_BYTES 65536     /* verdict messages collected before one sendto() */
#define VERDICT_MSG_MAX 64          /* the size of one verdict message, rounded up */
#define NS_PER_MS 1000000.0
#define NS_PER_S 1000000000ULL
#define STATS_PERIOD_NS NS_PER_S
/* the most a release wakes early: a few of a VM's usual timer latencies (50-100 us), far
 * below a stolen vCPU's milliseconds, which the mean must not learn */
#define WAKE_LEAD_MAX_NS 300000ULL
#define TRACE_OPPORTUNITY_BYTES 1500
#define NO_TIME UINT64_MAX

enum mode { MODE_DELAY, MODE_LINKS, MODE_TRACE };
enum fate { FATE_DELIVERED = 'd', FATE_LOSS = 'l', FATE_BUFFER = 'b' };
/* reorder window slot states (two links with --reorder-timeout) */
enum slot { SLOT_PENDING, SLOT_DONE, SLOT_READY };

/* ---------------------------------------------------------------- configuration */

struct link {
	double rate;            /* bit/s; 0 = no serialization (single link, trace) */
	double delay_ms;
	double jitter_cv;       /* standard deviation of the delay / the delay */
	double loss;
	uint64_t buffer;        /* bytes */
	uint64_t busy_until;    /* ns: the serialization of the last packet ends */
	/* counters (packets includes the pinned ones) */
	uint64_t packets, bytes, dropped_loss, dropped_buffer, pinned;
};

struct config {
	int queue;
	const char *stats_path;
	const char *log_path;
	uint64_t seed;
	enum mode mode;
	int n_links;
	struct link links[2];
	uint64_t batch;
	unsigned ratio[2];
	double reorder_timeout_ms;
	int n_pins;
	uint8_t pin[65536];     /* --pin: 1 + the link of a pinned port; 0: not pinned */
	int rt_priority;        /* --rt-priority: SCHED_FIFO priority; 0: the default policy */
	const char *trace_path;
	uint64_t trace_buffer;
	uint64_t *trace;        /* ns offsets of the delivery opportunities in one period */
	size_t trace_len;
};

static struct config cfg = { .queue = -1, .batch = 100, .ratio = { 1, 1 } };

/* ---------------------------------------------------------------- counters */

static struct {
	uint64_t received, delivered, dropped_loss, dropped_buffer;
	uint64_t reordered, reorder_timeouts;
	uint64_t held, held_bytes, held_max, held_max_bytes;
	uint64_t bytes_received, bytes_delivered;
	uint64_t nfq_enobufs, verdict_errors, bad_messages;
	uint64_t late_sum_ns, late_max_ns; /* verdict time - the model's release time */
	uint64_t early_sum_ns;             /* the model's release time - an earlier verdict */
	uint64_t stamped, read_late_sum_ns; /* arrivals timed by the kernel; read - that time */
	/* per stream (the split packets, those pinned to link 0, to link 1): the highest seq
	 * delivered + 1; 0 = nothing delivered yet */
	uint64_t max_seq_delivered[3];
	uint64_t split;                    /* split packets received (two links) */
} st;

/* How early a release wakes: the running mean (1/16 per wake-up) of how late the timer
 * wake-ups for releases were, each capped at WAKE_LEAD_MAX_NS. A release due within it is
 * made at once: early by the lead less the wake-up's own lateness, on time on average. */
static uint64_t wake_lead_ns;

static void learn_wake_lateness(uint64_t late_ns)
{
	uint64_t x = late_ns < WAKE_LEAD_MAX_NS ? late_ns : WAKE_LEAD_MAX_NS;

	wake_lead_ns = wake_lead_ns - wake_lead_ns / 16 + x / 16;
}

/* ---------------------------------------------------------------- errors */

/* Bad input: one line, exit 2 (nothing is bound yet). */
static void __attribute__((noreturn, format(printf, 1, 2))) die_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs(PROG ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

/* A failure at run time: one line naming what failed and errno, exit 1. */
static void __attribute__((noreturn)) die_sys(const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(errno));
	exit(1);
}

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);

	if (q == NULL)
		die_sys("out of memory");
	return q;
}

/* ---------------------------------------------------------------- clocks */

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static uint64_t mono(void) { return clock_ns(CLOCK_MONOTONIC); }

static uint64_t t_start;        /* monotonic ns at start */
static char sched_error[200];   /* why --rt-priority was refused ("": it was not) */
static int64_t realtime_offset; /* CLOCK_REALTIME - CLOCK_MONOTONIC, for the log */

static uint64_t ms_to_ns(double ms) { return ms <= 0 ? 0 : (uint64_t)llround(ms * NS_PER_MS); }

/* ---------------------------------------------------------------- random numbers */

/* xoshiro256** seeded through splitmix64: fast, and a run is repeatable with --seed. */
static uint64_t rng_s[4];

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_seed(uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		rng_s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(void)
{
	uint64_t r = rotl(rng_s[1] * 5, 7) * 9, t = rng_s[1] << 17;

	rng_s[2] ^= rng_s[0];
	rng_s[3] ^= rng_s[1];
	rng_s[1] ^= rng_s[2];
	rng_s[0] ^= rng_s[3];
	rng_s[2] ^= t;
	rng_s[3] = rotl(rng_s[3], 45);
	return r;
}

/* uniform in [0, 1) with 53 random bits */
static double uniform(void) { return (double)(rng_next() >> 11) * 0x1.0p-53; }

/* standard normal, Box-Muller; the second value of each pair is kept for the next call */
static double normal(void)
{
	static int have;
	static double spare;
	double u, v, r;

	if (have) {
		have = 0;
		return spare;
	}
	u = 1.0 - uniform(); /* (0, 1]: log() stays finite */
	v = uniform();
	r = sqrt(-2.0 * log(u));
	spare = r * sin(2.0 * M_PI * v);
	have = 1;
	return r * cos(2.0 * M_PI * v);
}

/* max(0, N(delay, (cv * delay)^2)) in ns: jitter reorders packets, as netem's does */
static uint64_t sample_delay(double delay_ms, double cv)
{
	double d = delay_ms;

	if (cv > 0)
		d += cv * delay_ms * normal();
	return ms_to_ns(d);
}

static int chance(double p) { return p > 0 && uniform() < p; }

/* ---------------------------------------------------------------- held packets */

struct flow {
	uint8_t family; /* 0: not parsed, 4 or 6 */
	uint8_t proto;
	uint8_t has_ports;
	uint16_t sport, dport;
	uint8_t src[16], dst[16];
};

struct pkt {
	uint64_t arrival;  /* monotonic ns when read from the queue */
	uint64_t release;  /* monotonic ns when it leaves its current stage */
	uint64_t seq;      /* arrival order, from 0 */
	uint64_t split_seq; /* two links: the order among the split (unpinned) packets */
	uint32_t id;       /* the kernel's packet id: the verdict names it */
	uint32_t size;     /* IP length (NFQA_CAP_LEN when the copy was cut) */
	uint8_t link;
	uint8_t pinned;    /* --pin: on its link by its port, outside the split */
	uint8_t used;
	struct flow flow;  /* filled only with --log or --pin */
};

/* Packets live in one growing pool and are named by index everywhere (heap, FIFOs, reorder
 * window): a realloc of the pool then invalidates no reference. */
static struct pkt *pool;
static uint32_t pool_cap, *free_list, n_free;

static uint32_t pkt_alloc(void)
{
	if (n_free == 0) {
		uint32_t old = pool_cap, cap = old ? old * 2 : 1024;

		pool = xrealloc(pool, cap * sizeof(*pool));
		memset(pool + old, 0, (cap - old) * sizeof(*pool)); /* .used = 0: release_all */
		free_list = xrealloc(free_list, cap * sizeof(*free_list));
		for (uint32_t i = cap; i > old; i--)
			free_list[n_free++] = i - 1;
		pool_cap = cap;
	}
	return free_list[--n_free];
}

static void pkt_free(uint32_t i)
{
	pool[i].used = 0;
	free_list[n_free++] = i;
}

/* ---------------------------------------------------------------- binary heap by release time */

struct hent {
	uint64_t key;  /* release time */
	uint64_t seq;  /* ties in arrival order: a fixed delay keeps the order */
	uint32_t idx;
};

static struct hent *heap;
static size_t heap_len, heap_cap;

static int hless(const struct hent *a, const struct hent *b)
{
	return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

static void heap_push(uint32_t idx)
{
	struct hent e = { pool[idx].release, pool[idx].seq, idx };
	size_t i = heap_len++;

	if (heap_len > heap_cap) {
		heap_cap = heap_cap ? heap_cap * 2 : 1024;
		heap = xrealloc(heap, heap_cap * sizeof(*heap));
	}
	while (i > 0 && hless(&e, &heap[(i - 1) / 2])) {
		heap[i] = heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	heap[i] = e;
}

static uint32_t heap_pop(void)
{
	uint32_t top = heap[0].idx;
	struct hent last = heap[--heap_len];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= heap_len)
			break;
		if (c + 1 < heap_len && hless(&heap[c + 1], &heap[c]))
			c++;
		if (!hless(&heap[c], &last))
			break;
		heap[i] = heap[c];
		i = c;
	}
	if (heap_len > 0)
		heap[i] = last;
	return top;
}

static uint64_t heap_top_time(void) { return heap_len ? heap[0].key : NO_TIME; }

/* ---------------------------------------------------------------- FIFO of (index, time) */

struct fent {
	uint64_t t;
	uint64_t seq;
	uint32_t idx;
};

struct fifo {
	struct fent *v;
	size_t cap, head, len;  /* cap: a power of two */
};

static void fifo_push(struct fifo *f, struct fent e)
{
	if (f->len == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 1024;
		struct fent *v = xrealloc(NULL, cap * sizeof(*v));

		for (size_t i = 0; i < f->len; i++)
			v[i] = f->v[(f->head + i) & (f->cap - 1)];
		free(f->v);
		*f = (struct fifo){ v, cap, 0, f->len };
	}
	f->v[(f->head + f->len++) & (f->cap - 1)] = e;
}

static struct fent *fifo_head(struct fifo *f) { return f->len ? &f->v[f->head] : NULL; }

static void fifo_pop(struct fifo *f)
{
	f->head = (f->head + 1) & (f->cap - 1);
	f->len--;
}

/* ---------------------------------------------------------------- output: log */

static FILE *log_fp;

static void format_addr(char *out, size_t n, const struct flow *f, const uint8_t *a)
{
	if (inet_ntop(f->family == 6 ? AF_INET6 : AF_INET, a, out, (socklen_t)n) == NULL)
		out[0] = '\0';
}

/* One CSV line: arrival_ns,release_ns,size,link,fate,proto,src,sport,dst,dport (times in
 * CLOCK_REALTIME ns; release empty for a drop; proto the IP protocol number; ports empty for
 * other protocols and fragments). Lines come in verdict order, not arrival order. */
static void log_packet(const struct pkt *p, char fate, uint64_t verdict_mono)
{
	char src[INET6_ADDRSTRLEN] = "", dst[INET6_ADDRSTRLEN] = "";
	char rel[24] = "", proto[8] = "", sport[8] = "", dport[8] = "";
	const struct flow *f = &p->flow;

	if (fate == FATE_DELIVERED)
		snprintf(rel, sizeof(rel), "%" PRId64, (int64_t)verdict_mono + realtime_offset);
	if (f->family) {
		snprintf(proto, sizeof(proto), "%u", f->proto);
		format_addr(src, sizeof(src), f, f->src);
		format_addr(dst, sizeof(dst), f, f->dst);
	}
	if (f->has_ports) {
		snprintf(sport, sizeof(sport), "%u", f->sport);
		snprintf(dport, sizeof(dport), "%u", f->dport);
	}
	fprintf(log_fp, "%" PRId64 ",%s,%u,%u,%c,%s,%s,%s,%s,%s\n",
		(int64_t)p->arrival + realtime_offset, rel, p->size, p->link, fate, proto, src,
		sport, dst, dport);
}

/* ---------------------------------------------------------------- netlink */

static int nl_fd = -1;
static char verdict_buf[VERDICT_BUF_BYTES];
static size_t verdict_len;
static uint32_t nl_seq;

static void nl_send(const void *buf, size_t len)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };

	if (sendto(nl_fd, buf, len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		die_sys("netlink sendto");
}

/* Verdicts are collected and sent together: one system call for all packets due at once. */
static void verdicts_flush(void)
{
	if (verdict_len == 0)
		return;
	nl_send(verdict_buf, verdict_len);
	verdict_len = 0;
}

static void verdict_add(uint32_t id, int verdict)
{
	struct nlmsghdr *nlh;

	if (verdict_len + VERDICT_MSG_MAX > sizeof(verdict_buf))
		verdicts_flush();
	nlh = nfq_nlmsg_put(verdict_buf + verdict_len, NFQNL_MSG_VERDICT, (uint32_t)cfg.queue);
	nfq_nlmsg_verdict_put(nlh, (int)id, verdict);
	verdict_len += NLMSG_ALIGN(nlh->nlmsg_len);
}

/* ---------------------------------------------------------------- verdicts and counters */

/* after an arrival's fate is known: a packet dropped at once was never held */
static void held_peak(void)
{
	if (st.held > st.held_max)
		st.held_max = st.held;
	if (st.held_bytes > st.held_max_bytes)
		st.held_max_bytes = st.held_bytes;
}

/* Accept a packet now. sched: the model's release time (for the lateness counters). */
static void deliver(uint32_t idx, uint64_t sched, uint64_t now)
{
	struct pkt *p = &pool[idx];
	uint64_t late = now > sched ? now - sched : 0;
	uint64_t *top;

	st.early_sum_ns += sched > now ? sched - now : 0;

	verdict_add(p->id, NF_ACCEPT);
	st.delivered++;
	st.bytes_delivered += p->size;
	st.held--;
	st.held_bytes -= p->size;
	st.late_sum_ns += late;
	if (late > st.late_max_ns)
		st.late_max_ns = late;
	/* out of arrival order: a packet of its stream that arrived later was delivered first */
	top = &st.max_seq_delivered[p->pinned ? 1 + p->link : 0];
	if (p->seq + 1 < *top)
		st.reordered++;
	else
		*top = p->seq + 1;
	if (log_fp)
		log_packet(p, FATE_DELIVERED, now);
	pkt_free(idx);
}

static void drop(uint32_t idx, enum fate fate, uint64_t now)
{
	struct pkt *p = &pool[idx];
	struct link *l = &cfg.links[p->link];

	verdict_add(p->id, NF_DROP);
	st.held--;
	st.held_bytes -= p->size;
	if (fate == FATE_LOSS) {
		st.dropped_loss++;
		l->dropped_loss++;
	} else {
		st.dropped_buffer++;
		l->dropped_buffer++;
	}
	if (log_fp)
		log_packet(p, (char)fate, now);
	pkt_free(idx);
}

/* ---------------------------------------------------------------- reordering (two links) */

/* PDCP-like delivery in arrival sequence, of the split packets only (numbered by split_seq; a
 * pinned packet is not in the window and goes when it reaches the far end). The window holds
 * the state of every sequence number from `next` (the lowest not yet delivered or dropped) to
 * the newest arrival: pending (in flight on a link), done (dropped at arrival: it must not
 * stall the others) or ready (at the far end, waiting for lower numbers; its index is kept).
 * Each ready packet also waits in a FIFO of deadlines (far-end time + T): with one T for all,
 * the deadlines come in order. */
static struct {
	uint8_t *state;
	uint32_t *idx;
	uint64_t cap, next; /* cap: a power of two */
	struct fifo deadlines;
	uint64_t timeout_ns;
} ro;

static int reordering(void) { return cfg.mode == MODE_LINKS && ro.timeout_ns > 0; }

/* whether a packet goes through the reorder window */
static int in_window(const struct pkt *p) { return reordering() && !p->pinned; }

/* make room for sequence number seq (the newest arrival) */
static void ro_reserve(uint64_t seq)
{
	uint64_t cap = ro.cap ? ro.cap : 4096;

	while (seq - ro.next >= cap)
		cap *= 2;
	if (cap == ro.cap)
		return;
	uint8_t *state = xrealloc(NULL, cap);
	uint32_t *idx = xrealloc(NULL, cap * sizeof(*idx));

	memset(state, SLOT_PENDING, cap);
	for (uint64_t s = ro.next; s < seq; s++) {
		state[s & (cap - 1)] = ro.state[s & (ro.cap - 1)];
		idx[s & (cap - 1)] = ro.idx[s & (ro.cap - 1)];
	}
	free(ro.state);
	free(ro.idx);
	ro.state = state;
	ro.idx = idx;
	ro.cap = cap;
}

/* deliver or skip everything from `next` on that is no longer waited for */
static void ro_advance(uint64_t sched, uint64_t now)
{
	while (ro.next < st.split) {
		uint64_t s = ro.next & (ro.cap - 1);

		if (ro.state[s] == SLOT_PENDING)
			break;
		if (ro.state[s] == SLOT_READY)
			deliver(ro.idx[s], sched, now);
		ro.state[s] = SLOT_PENDING;
		ro.next++;
	}
}

static void ro_done(uint64_t seq, uint64_t now)
{
	ro.state[seq & (ro.cap - 1)] = SLOT_DONE;
	ro_advance(now, now);
}

/* a packet reached the far end at time t */
static void ro_arrive(uint32_t idx, uint64_t t, uint64_t now)
{
	uint64_t seq = pool[idx].split_seq;

	if (seq < ro.next) { /* its gap timed out already: it goes late, out of order */
		deliver(idx, t, now);
		return;
	}
	ro.state[seq & (ro.cap - 1)] = SLOT_READY;
	ro.idx[seq & (ro.cap - 1)] = idx;
	if (seq == ro.next) {
		ro_advance(t, now);
		return;
	}
	fifo_push(&ro.deadlines, (struct fent){ t + ro.timeout_ns, seq, idx });
}

/* The oldest waiting packet waited T: it and every ready packet before it go; the gaps
 * before it are given up (their packets go when they come). */
static void ro_timeout(uint64_t now)
{
	struct fent e = *fifo_head(&ro.deadlines);

	fifo_pop(&ro.deadlines);
	if (e.seq < ro.next) /* delivered in sequence meanwhile */
		return;
	st.reorder_timeouts++;
	while (ro.next <= e.seq) {
		uint64_t s = ro.next & (ro.cap - 1);

		if (ro.state[s] == SLOT_READY)
			deliver(ro.idx[s], e.t, now);
		ro.state[s] = SLOT_PENDING;
		ro.next++;
	}
	ro_advance(e.t, now);
}

static uint64_t ro_next_deadline(void)
{
	/* entries already delivered in sequence are skipped when they fall due */
	struct fent *e = fifo_head(&ro.deadlines);

	return e ? e->t : NO_TIME;
}

/* ---------------------------------------------------------------- trace (mahimahi) */

/* Rule of the trace link: opportunity k of the trace (one per line; a time in ms; the trace
 * repeats every <last line> ms, counted from the start of the program) lets up to 1500 bytes
 * of the FIFO leave, whole packets only, in order: a packet bigger than what remains of the
 * 1500 bytes waits for the next opportunity, and a packet bigger than 1500 bytes (GSO, jumbo)
 * takes one whole opportunity of its own. Opportunities while the FIFO is empty are lost (as
 * in mahimahi). Drop-tail at --trace-buffer bytes. Random loss, delay and jitter apply when a
 * packet leaves the FIFO. */
static struct {
	struct fifo q;
	uint64_t bytes;
	uint64_t cycle;  /* the next opportunity: cycle * period + trace[i] after t_start */
	size_t i;
	uint64_t period;
} tr;

static uint64_t tr_time(void) { return t_start + tr.cycle * tr.period + cfg.trace[tr.i]; }

/* the first opportunity at or after now (the FIFO was empty until now) */
static void tr_seek(uint64_t now)
{
	uint64_t el = now - t_start, within = el % tr.period;
	size_t lo = 0, hi = cfg.trace_len;

	tr.cycle = el / tr.period;
	while (lo < hi) { /* the first trace[i] >= within */
		size_t mid = (lo + hi) / 2;

		if (cfg.trace[mid] < within)
			lo = mid + 1;
		else
			hi = mid;
	}
	tr.i = lo;
	if (tr.i == cfg.trace_len) {
		tr.cycle++;
		tr.i = 0;
	}
}

static void tr_step(void)
{
	if (++tr.i == cfg.trace_len) {
		tr.i = 0;
		tr.cycle++;
	}
}

/* after the bottleneck: random loss, then delay and jitter (the single link's parameters) */
static void tr_leave(uint32_t idx, uint64_t t, uint64_t now)
{
	struct link *l = &cfg.links[0];

	if (chance(l->loss)) {
		drop(idx, FATE_LOSS, now);
		return;
	}
	pool[idx].release = t + sample_delay(l->delay_ms, l->jitter_cv);
	heap_push(idx);
}

/* one delivery opportunity at tr_time() */
static void tr_serve(uint64_t now)
{
	uint64_t t = tr_time(), budget = TRACE_OPPORTUNITY_BYTES;
	struct fent *e;

	while ((e = fifo_head(&tr.q)) != NULL) {
		uint32_t size = pool[e->idx].size;

		if (size > budget && budget < TRACE_OPPORTUNITY_BYTES)
			break;
		budget = size > budget ? 0 : budget - size;
		tr.bytes -= size;
		fifo_pop(&tr.q);
		tr_leave(e->idx, t, now);
		if (budget == 0)
			break;
	}
	tr_step();
}

static uint64_t tr_next(void) { return tr.q.len ? tr_time() : NO_TIME; }

/* ---------------------------------------------------------------- arrivals by mode */

static void arrive_delay(uint32_t idx, uint64_t now)
{
	struct pkt *p = &pool[idx];
	struct link *l = &cfg.links[0];

	if (chance(l->loss)) {
		drop(idx, FATE_LOSS, now);
		return;
	}
	p->release = now + sample_delay(l->delay_ms, l->jitter_cv);
	heap_push(idx);
}

/* split packets 0..batch*A-1 of each round go to link 0, the next batch*B to link 1 */
static uint8_t links_pick(uint64_t split_seq)
{
	uint64_t round = cfg.batch * (cfg.ratio[0] + cfg.ratio[1]);

	return split_seq % round < cfg.batch * cfg.ratio[0] ? 0 : 1;
}

/* the link a packet is pinned to by its source port, or else its destination port; -1: none */
static int pinned_link(const struct flow *f)
{
	if (!f->has_ports)
		return -1;
	if (cfg.pin[f->sport])
		return cfg.pin[f->sport] - 1;
	return cfg.pin[f->dport] ? cfg.pin[f->dport] - 1 : -1;
}

/* a pinned packet takes its port's link; the others are split in a sequence of their own */
static void links_assign(struct pkt *p)
{
	int pin = pinned_link(&p->flow);

	if (pin >= 0) {
		p->link = (uint8_t)pin;
		p->pinned = 1;
		cfg.links[pin].pinned++;
		return;
	}
	p->split_seq = st.split++;
	p->link = links_pick(p->split_seq);
}

static void links_drop(uint32_t idx, enum fate fate, uint64_t now)
{
	uint64_t seq = pool[idx].split_seq;
	int window = in_window(&pool[idx]);

	drop(idx, fate, now);
	if (window)
		ro_done(seq, now);
}

static void arrive_links(uint32_t idx, uint64_t now)
{
	struct pkt *p = &pool[idx];
	struct link *l = &cfg.links[p->link];
	double backlog;
	uint64_t start;

	if (in_window(p))
		ro_reserve(p->split_seq);
	if (chance(l->loss)) {
		links_drop(idx, FATE_LOSS, now);
		return;
	}
	/* The bytes still waiting in the link's queue, counted as the work left until the link is
	 * idle (busy_until - now at the link's rate): O(1), and exact at packet boundaries. */
	backlog = l->busy_until > now ? (double)(l->busy_until - now) * l->rate / 8e9 : 0;
	if (backlog + p->size > (double)l->buffer) {
		links_drop(idx, FATE_BUFFER, now);
		return;
	}
	start = l->busy_until > now ? l->busy_until : now;
	l->busy_until = start + (uint64_t)llround(p->size * 8e9 / l->rate);
	p->release = l->busy_until + sample_delay(l->delay_ms, l->jitter_cv);
	heap_push(idx);
}

static void arrive_trace(uint32_t idx, uint64_t now)
{
	struct pkt *p = &pool[idx];

	if (tr.bytes + p->size > cfg.trace_buffer) {
		drop(idx, FATE_BUFFER, now);
		return;
	}
	if (tr.q.len == 0)
		tr_seek(now);
	tr.bytes += p->size;
	fifo_push(&tr.q, (struct fent){ now, p->seq, idx });
}

/* ---------------------------------------------------------------- packet messages */

/* protocol and addresses from the first bytes of an IPv4 or IPv6 packet */
static void parse_flow(struct flow *f, const uint8_t *b, size_t len)
{
	size_t hl;
	int first_fragment = 1;

	memset(f, 0, sizeof(*f));
	if (len >= 20 && b[0] >> 4 == 4) {
		f->family = 4;
		hl = (size_t)(b[0] & 15) * 4;
		f->proto = b[9];
		memcpy(f->src, b + 12, 4);
		memcpy(f->dst, b + 16, 4);
		first_fragment = (((b[6] & 0x1f) << 8) | b[7]) == 0;
	} else if (len >= 40 && b[0] >> 4 == 6) {
		f->family = 6;
		hl = 40; /* extension headers are not followed */
		f->proto = b[6];
		memcpy(f->src, b + 8, 16);
		memcpy(f->dst, b + 24, 16);
	} else {
		return;
	}
	if ((f->proto == IPPROTO_TCP || f->proto == IPPROTO_UDP) && first_fragment &&
	    len >= hl + 4) {
		f->has_ports = 1;
		f->sport = (uint16_t)(b[hl] << 8 | b[hl + 1]);
		f->dport = (uint16_t)(b[hl + 2] << 8 | b[hl + 3]);
	}
}

static void packet_arrived(uint32_t id, uint32_t size, const uint8_t *data, size_t len,
			   uint64_t now)
{
	uint32_t idx = pkt_alloc();
	struct pkt *p = &pool[idx];

	*p = (struct pkt){ .arrival = now, .seq = st.received, .id = id, .size = size,
			   .used = 1 };
	if (log_fp || cfg.n_pins)
		parse_flow(&p->flow, data, len);
	if (cfg.mode == MODE_LINKS)
		links_assign(p);
	st.received++;
	st.bytes_received += size;
	st.held++;
	st.held_bytes += size;
	cfg.links[p->link].packets++;
	cfg.links[p->link].bytes += size;
	switch (cfg.mode) {
	case MODE_DELAY:
		arrive_delay(idx, now);
		break;
	case MODE_LINKS:
		arrive_links(idx, now);
		break;
	case MODE_TRACE:
		arrive_trace(idx, now);
		break;
	}
	held_peak();
}

static void *nla_data(const struct nlattr *a) { return (char *)a + NLA_HDRLEN; }

static uint32_t nla_be32(const struct nlattr *a)
{
	uint32_t v;

	memcpy(&v, nla_data(a), sizeof(v));
	return ntohl(v);
}

/* The kernel's time of a packet (NFQA_TIMESTAMP, CLOCK_REALTIME in us) on the monotonic
 * clock, kept between the previous arrival and now: a realtime step or a missing stamp
 * gives the time it was read. The trace mode keeps the read time: its delivery
 * opportunities up to now have been served already. */
static uint64_t arrival_time(struct nlattr *a, uint64_t now)
{
	static uint64_t last;
	struct nfqnl_msg_packet_timestamp ts;
	int64_t at;

	if (a == NULL || cfg.mode == MODE_TRACE)
		return last = now;
	memcpy(&ts, nla_data(a), sizeof(ts));
	at = (int64_t)be64toh(ts.sec) * (int64_t)NS_PER_S + (int64_t)be64toh(ts.usec) * 1000 -
	     realtime_offset;
	if (at > (int64_t)now || at < (int64_t)last)
		return last = now > last ? now : last;
	st.stamped++;
	st.read_late_sum_ns += now - (uint64_t)at;
	return last = (uint64_t)at;
}

static void handle_packet_msg(const struct nlmsghdr *nlh, uint64_t now)
{
	struct nlattr *attr[NFQA_MAX + 1];
	struct nfqnl_msg_packet_hdr ph;
	const uint8_t *data = NULL;
	size_t len = 0;
	uint32_t size;

	memset(attr, 0, sizeof(attr));
	if (nfq_nlmsg_parse(nlh, attr) < 0 || attr[NFQA_PACKET_HDR] == NULL) {
		st.bad_messages++;
		return;
	}
	memcpy(&ph, nla_data(attr[NFQA_PACKET_HDR]), sizeof(ph));
	if (attr[NFQA_PAYLOAD]) {
		data = nla_data(attr[NFQA_PAYLOAD]);
		len = attr[NFQA_PAYLOAD]->nla_len - NLA_HDRLEN;
	}
	/* the copy stops at COPY_RANGE bytes; the kernel then says the true length */
	size = attr[NFQA_CAP_LEN] ? nla_be32(attr[NFQA_CAP_LEN]) : (uint32_t)len;
	packet_arrived(ntohl(ph.packet_id), size, data, len,
		       arrival_time(attr[NFQA_TIMESTAMP], now));
}

/* one datagram from the socket: packet messages, and errors of verdicts we sent */
static void handle_datagram(const char *buf, size_t n, uint64_t now)
{
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
	int len = (int)n;

	for (; NLMSG_OK(nlh, len); nlh = NLMSG_NEXT(nlh, len)) {
		if (nlh->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(nlh);

			if (e->error != 0)
				st.verdict_errors++;
		} else if (nlh->nlmsg_type == ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET)) {
			handle_packet_msg(nlh, now);
		}
	}
}

static struct mmsghdr rmsg[RECV_BATCH];
static struct iovec riov[RECV_BATCH];
static char rbuf[RECV_BATCH][RECV_BUF_BYTES];

static void recv_setup(void)
{
	for (int i = 0; i < RECV_BATCH; i++) {
		riov[i] = (struct iovec){ rbuf[i], sizeof(rbuf[i]) };
		rmsg[i].msg_hdr = (struct msghdr){ .msg_iov = &riov[i], .msg_iovlen = 1 };
	}
}

static void run_due(uint64_t now);

/* Read what the kernel queued, without blocking. ENOBUFS: the socket overflowed and the
 * kernel dropped packets it could not tell us about: counted, then reading goes on. Events
 * due before the packets were read run first (a trace opportunity that passed while we
 * slept is not theirs). */
static void drain(void)
{
	int total = 0;

	while (total < DRAIN_MAX) {
		int n = recvmmsg(nl_fd, rmsg, RECV_BATCH, MSG_DONTWAIT, NULL);
		uint64_t now = mono();

		if (n < 0 && errno == ENOBUFS) {
			st.nfq_enobufs++;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (n < 0)
			die_sys("netlink recvmmsg");
		run_due(now);
		for (int i = 0; i < n; i++) {
			if (rmsg[i].msg_hdr.msg_flags & MSG_TRUNC)
				st.bad_messages++;
			else
				handle_datagram(rbuf[i], rmsg[i].msg_len, now);
		}
		total += n;
		if (n < RECV_BATCH)
			return;
	}
}

/* ---------------------------------------------------------------- binding */

static void nl_open(void)
{
	struct sockaddr_nl local = { .nl_family = AF_NETLINK };
	int size = RCVBUF_BYTES, zero = 0;

	nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (nl_fd < 0)
		die_sys("netlink socket");
	if (bind(nl_fd, (struct sockaddr *)&local, sizeof(local)) < 0)
		die_sys("netlink bind");
	/* FORCE passes net.core.rmem_max (we are root); the plain one is the fallback */
	if (setsockopt(nl_fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0 &&
	    setsockopt(nl_fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) < 0)
		die_sys("netlink SO_RCVBUF");
	/* off: an overflow must show as ENOBUFS, to be counted */
	if (setsockopt(nl_fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &zero, sizeof(zero)) < 0)
		die_sys("netlink NETLINK_NO_ENOBUFS");
}

/* Send one configuration message with NLM_F_ACK and wait for its answer; packets that arrive
 * meanwhile (the queue is bound by the first one) are handled as usual. */
static void nl_config(struct nlmsghdr *nlh, const char *what)
{
	char buf[8192];

	nlh->nlmsg_flags |= NLM_F_ACK;
	nlh->nlmsg_seq = ++nl_seq;
	nl_send(nlh, nlh->nlmsg_len);
	for (;;) {
		ssize_t n = recv(nl_fd, buf, sizeof(buf), 0);
		const struct nlmsghdr *m = (const struct nlmsghdr *)buf;
		int len = (int)n;

		if (n < 0 && errno == ENOBUFS) {
			st.nfq_enobufs++;
			continue;
		}
		if (n < 0)
			die_sys("netlink recv");
		for (; NLMSG_OK(m, len); m = NLMSG_NEXT(m, len)) {
			const struct nlmsgerr *e = NLMSG_DATA(m);

			if (m->nlmsg_type != NLMSG_ERROR || m->nlmsg_seq != nl_seq) {
				handle_datagram((const char *)m, m->nlmsg_len, mono());
				continue;
			}
			if (e->error == 0)
				return;
			errno = -e->error;
			fprintf(stderr, PROG ": queue %d: %s: %s%s\n", cfg.queue, what,
				strerror(errno),
				errno == EBUSY ? " (another process has bound it)" : "");
			exit(1);
		}
	}
}

static void nl_bind_queue(void)
{
	char buf[256];
	struct nlmsghdr *nlh;

	nl_open();
	nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, (uint32_t)cfg.queue);
	nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_BIND);
	nl_config(nlh, "bind");
	nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, (uint32_t)cfg.queue);
	nfq_nlmsg_cfg_put_params(nlh, NFQNL_COPY_PACKET, COPY_RANGE);
	nfq_nlmsg_cfg_put_qmaxlen(nlh, KERNEL_QUEUE_MAXLEN);
	nl_config(nlh, "copy mode and queue length");
}

/* ---------------------------------------------------------------- stats */

static void stats_links(FILE *f)
{
	fputs("[", f);
	for (int i = 0; i < cfg.n_links; i++) {
		const struct link *l = &cfg.links[i];

		fprintf(f, "%s{\"packets\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"dropped_loss\": %"
			PRIu64 ", \"dropped_buffer\": %" PRIu64 ", \"pinned\": %" PRIu64 "}",
			i ? ", " : "", l->packets, l->bytes, l->dropped_loss, l->dropped_buffer,
			l->pinned);
	}
	fputs("]", f);
}

static double tv_s(struct timeval tv) { return (double)tv.tv_sec + tv.tv_usec / 1e6; }

static void stats_body(FILE *f, uint64_t now)
{
	static const char *const modes[] = { "delay", "links", "trace" };
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	fprintf(f, "{\"queue\": %d, \"mode\": \"%s\", \"pid\": %ld, \"seed\": %" PRIu64 ",\n",
		cfg.queue, modes[cfg.mode], (long)getpid(), cfg.seed);
	fprintf(f, " \"received\": %" PRIu64 ", \"delivered\": %" PRIu64 ", \"dropped_loss\": %"
		PRIu64 ", \"dropped_buffer\": %" PRIu64 ",\n", st.received, st.delivered,
		st.dropped_loss, st.dropped_buffer);
	fprintf(f, " \"reordered\": %" PRIu64 ", \"reorder_timeouts\": %" PRIu64 ", \"held\": %"
		PRIu64 ", \"held_bytes\": %" PRIu64 ", \"held_max\": %" PRIu64
		", \"held_max_bytes\": %" PRIu64 ",\n", st.reordered, st.reorder_timeouts, st.held,
		st.held_bytes, st.held_max, st.held_max_bytes);
	fprintf(f, " \"bytes_received\": %" PRIu64 ", \"bytes_delivered\": %" PRIu64
		", \"nfq_enobufs\": %" PRIu64 ", \"verdict_errors\": %" PRIu64
		", \"bad_messages\": %" PRIu64 ",\n", st.bytes_received, st.bytes_delivered,
		st.nfq_enobufs, st.verdict_errors, st.bad_messages);
	fprintf(f, " \"late_mean_us\": %.3f, \"late_max_us\": %.3f, \"early_mean_us\": %.3f,\n",
		st.delivered ? (double)st.late_sum_ns / (double)st.delivered / 1e3 : 0.0,
		(double)st.late_max_ns / 1e3,
		st.delivered ? (double)st.early_sum_ns / (double)st.delivered / 1e3 : 0.0);
	fprintf(f, " \"stamped\": %" PRIu64 ", \"read_late_mean_us\": %.3f, \"wake_lead_us\": %.3f,\n",
		st.stamped, st.stamped ? (double)st.read_late_sum_ns / (double)st.stamped / 1e3 : 0.0,
		(double)wake_lead_ns / 1e3);
	fprintf(f, " \"sched\": \"%s\", \"rt_priority\": %d, \"sched_error\": ",
		(sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) == SCHED_FIFO ? "fifo" : "other",
		cfg.rt_priority);
	if (sched_error[0])
		fprintf(f, "\"%s\",\n", sched_error);
	else
		fputs("null,\n", f);
	fputs(" \"links\": ", f);
	stats_links(f);
	fprintf(f, ",\n \"cpu_user_s\": %.6f, \"cpu_sys_s\": %.6f, \"wall_s\": %.6f}\n",
		tv_s(ru.ru_utime), tv_s(ru.ru_stime), (double)(now - t_start) / 1e9);
}

/* Written to FILE.tmp, then renamed: a reader never sees half a file. A failure to write is
 * reported but does not stop the delay line (the packets matter more than the stats). */
static void stats_write(uint64_t now)
{
	char tmp[4096];
	FILE *f;

	if (log_fp && fflush(log_fp) != 0)
		perror(PROG ": --log");
	if (cfg.stats_path == NULL)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", cfg.stats_path);
	f = fopen(tmp, "w");
	if (f == NULL) {
		perror(PROG ": --stats");
		return;
	}
	stats_body(f, now);
	if (fclose(f) != 0 || rename(tmp, cfg.stats_path) != 0)
		perror(PROG ": --stats");
}

/* ---------------------------------------------------------------- the loop */

static volatile sig_atomic_t got_stop, got_usr1;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		got_usr1 = 1;
	else
		got_stop = 1;
}

/* The signals are blocked except inside ppoll(): a signal can't slip in between the check of
 * the flags and the wait. Returns the mask for ppoll. */
static sigset_t signals_setup(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block, wait_mask;
	int sigs[] = { SIGTERM, SIGINT, SIGUSR1 };

	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		sigaction(sigs[i], &sa, NULL);
		sigaddset(&block, sigs[i]);
	}
	sigprocmask(SIG_BLOCK, &block, &wait_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigdelset(&wait_mask, sigs[i]);
	return wait_mask;
}

enum event { EV_NONE, EV_HEAP, EV_TRACE, EV_DEADLINE };


/* the earliest pending event and its time */
static enum event next_event(uint64_t *t)
{
	enum event ev = EV_NONE;
	uint64_t h = heap_top_time(), q = tr_next(), d = ro_next_deadline();

	*t = NO_TIME;
	if (h < *t) {
		*t = h;
		ev = EV_HEAP;
	}
	if (q < *t) {
		*t = q;
		ev = EV_TRACE;
	}
	if (d < *t) {
		*t = d;
		ev = EV_DEADLINE;
	}
	return ev;
}

/* Run every event due by now, earliest first: the order matters (a packet reaching the far
 * end after its gap timed out is late, one reaching it before is not). */
static void run_due(uint64_t now)
{
	uint64_t t;
	enum event ev;

	while ((ev = next_event(&t)) != EV_NONE && t <= now + (ev == EV_HEAP ? wake_lead_ns : 0)) {
		if (ev == EV_TRACE) {
			tr_serve(now);
		} else if (ev == EV_DEADLINE) {
			ro_timeout(now);
		} else {
			uint32_t idx = heap_pop();

			if (in_window(&pool[idx]))
				ro_arrive(idx, t, now);
			else
				deliver(idx, t, now);
		}
	}
}

/* Accept every held packet at once (SIGTERM): closing the socket would make the kernel drop
 * them. */
static void release_all(uint64_t now)
{
	for (uint32_t i = 0; i < pool_cap; i++)
		if (pool[i].used)
			deliver(i, now, now);
	verdicts_flush();
}

/* Wait for a packet, a signal or `until`; a timed-out wait for a release (`release`) tells
 * how late the timer woke. */
static void wait_for(uint64_t until, uint64_t now, int release, const sigset_t *mask)
{
	struct pollfd pfd = { .fd = nl_fd, .events = POLLIN };
	uint64_t d = until > now ? until - now : 0;
	struct timespec ts = { (time_t)(d / NS_PER_S), (long)(d % NS_PER_S) };
	int n = ppoll(&pfd, 1, &ts, mask);

	if (n < 0 && errno != EINTR)
		die_sys("ppoll");
	if (n == 0 && release && d > 0) {
		uint64_t woke = mono();

		learn_wake_lateness(woke > until ? woke - until : 0);
	}
	if (pfd.revents & (POLLIN | POLLERR))
		drain();
}

static void loop(const sigset_t *mask)
{
	uint64_t next_stats = t_start + STATS_PERIOD_NS, now, t;
	int release;

	while (!got_stop) {
		now = mono();
		run_due(now);
		verdicts_flush();
		if (got_usr1 || now >= next_stats) {
			got_usr1 = 0;
			stats_write(now);
			while (next_stats <= now)
				next_stats += STATS_PERIOD_NS;
		}
		release = next_event(&t) == EV_HEAP;
		if (release)
			t = t > wake_lead_ns ? t - wake_lead_ns : 0;
		release = release && t < next_stats;
		wait_for(t < next_stats ? t : next_stats, now, release, mask);
	}
	now = mono();
	release_all(now);
	stats_write(now);
}

/* ---------------------------------------------------------------- arguments */

static double parse_num(const char *opt, const char *s, double lo, double hi)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v))
		die_usage("%s: not a number: '%s'", opt, s);
	if (v < lo || v > hi)
		die_usage("%s: out of range [%g, %g]: '%s'", opt, lo, hi, s);
	return v;
}

static uint64_t parse_uint(const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || *end != '\0' || errno == ERANGE || s[0] == '-')
		die_usage("%s: not a whole number: '%s'", opt, s);
	if (v < lo || v > hi)
		die_usage("%s: out of range [%" PRIu64 ", %" PRIu64 "]: '%s'", opt, lo, hi, s);
	return v;
}

/* rate=BITS_PER_S,delay=MS,jitter=CV,loss=P,buffer=BYTES; rate and buffer are required */
static void parse_link(const char *spec, struct link *l)
{
	char *copy = strdup(spec), *save = NULL, *kv;
	int have_rate = 0, have_buffer = 0;

	if (copy == NULL)
		die_sys("out of memory");
	for (kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *v = strchr(kv, '=');

		if (v == NULL)
			die_usage("--link: not key=value: '%s'", kv);
		*v++ = '\0';
		if (strcmp(kv, "rate") == 0) {
			l->rate = parse_num("--link rate", v, 1, 1e12);
			have_rate = 1;
		} else if (strcmp(kv, "delay") == 0) {
			l->delay_ms = parse_num("--link delay", v, 0, 1e6);
		} else if (strcmp(kv, "jitter") == 0) {
			l->jitter_cv = parse_num("--link jitter", v, 0, 1e3);
		} else if (strcmp(kv, "loss") == 0) {
			l->loss = parse_num("--link loss", v, 0, 1);
		} else if (strcmp(kv, "buffer") == 0) {
			l->buffer = parse_uint("--link buffer", v, 1, UINT64_MAX / 2);
			have_buffer = 1;
		} else {
			die_usage("--link: unknown key '%s' (rate, delay, jitter, loss, buffer)", kv);
		}
	}
	if (!have_rate || !have_buffer)
		die_usage("--link: rate= and buffer= are required: '%s'", spec);
	free(copy);
}

static void parse_ratio(const char *s)
{
	unsigned a, b;
	char tail;

	if (sscanf(s, "%u:%u%c", &a, &b, &tail) != 2 || a + b == 0 || a > 1000000 || b > 1000000)
		die_usage("--ratio: not A:B (whole numbers, not both 0): '%s'", s);
	cfg.ratio[0] = a;
	cfg.ratio[1] = b;
}

/* PORT=LINK: PORT 1..65535, LINK 0 or 1; a port is pinned once */
static void parse_pin(const char *spec)
{
	char copy[32], *link = NULL;
	uint64_t port;

	if (strlen(spec) < sizeof(copy))
		link = strchr(strcpy(copy, spec), '=');
	if (link == NULL)
		die_usage("--pin: not PORT=LINK: '%s'", spec);
	*link++ = '\0';
	port = parse_uint("--pin: PORT", copy, 1, 65535);
	if (strcmp(link, "0") != 0 && strcmp(link, "1") != 0)
		die_usage("--pin: LINK is 0 or 1: '%s'", spec);
	if (cfg.pin[port])
		die_usage("--pin: port %" PRIu64 " given twice", port);
	cfg.pin[port] = (uint8_t)(1 + link[0] - '0');
	cfg.n_pins++;
}

/* One line per opportunity: a time in ms, not decreasing; the last one (> 0) is the period. */
static void load_trace(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256];
	size_t n = 0, cap = 0, lineno = 0;

	if (f == NULL)
		die_usage("--trace: %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *end;
		unsigned long long v;

		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '\0')
			continue; /* blank lines (a trailing one) carry nothing */
		errno = 0;
		v = strtoull(line, &end, 10);
		if (end == line || *end != '\0' || line[0] == '-' || errno == ERANGE ||
		    v > UINT64_MAX / 1000000)
			die_usage("--trace: %s:%zu: not a number of ms: '%s'", path, lineno, line);
		if (n > 0 && v * 1000000 < cfg.trace[n - 1])
			die_usage("--trace: %s:%zu: goes back in time: '%s'", path, lineno, line);
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			cfg.trace = xrealloc(cfg.trace, cap * sizeof(*cfg.trace));
		}
		cfg.trace[n++] = v * 1000000;
	}
	if (ferror(f))
		die_usage("--trace: %s: %s", path, strerror(errno));
	fclose(f);
	if (n == 0 || cfg.trace[n - 1] == 0)
		die_usage("--trace: %s:%zu: no opportunity after 0 ms: the period would be 0", path,
			  lineno);
	cfg.trace_len = n;
}

enum {
	OPT_QUEUE = 256, OPT_STATS, OPT_LOG, OPT_SEED, OPT_DELAY, OPT_JITTER, OPT_LOSS, OPT_LINK,
	OPT_BATCH, OPT_RATIO, OPT_REORDER, OPT_TRACE, OPT_TRACE_BUFFER, OPT_PIN, OPT_RT_PRIORITY
};

static const struct option options[] = {
	{ "queue", required_argument, NULL, OPT_QUEUE },
	{ "stats", required_argument, NULL, OPT_STATS },
	{ "log", required_argument, NULL, OPT_LOG },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "delay", required_argument, NULL, OPT_DELAY },
	{ "jitter", required_argument, NULL, OPT_JITTER },
	{ "loss", required_argument, NULL, OPT_LOSS },
	{ "link", required_argument, NULL, OPT_LINK },
	{ "batch", required_argument, NULL, OPT_BATCH },
	{ "ratio", required_argument, NULL, OPT_RATIO },
	{ "reorder-timeout", required_argument, NULL, OPT_REORDER },
	{ "trace", required_argument, NULL, OPT_TRACE },
	{ "trace-buffer", required_argument, NULL, OPT_TRACE_BUFFER },
	{ "pin", required_argument, NULL, OPT_PIN },
	{ "rt-priority", required_argument, NULL, OPT_RT_PRIORITY },
	{ NULL, 0, NULL, 0 },
};

/* which options were given, to refuse the ones of another mode */
static unsigned given;
#define GIVEN(o) (1u << ((o) - OPT_QUEUE))

static void parse_option(int c, const char *arg, int *n_link_args)
{
	struct link *single = &cfg.links[0];

	given |= GIVEN(c);
	switch (c) {
	case OPT_QUEUE: cfg.queue = (int)parse_uint("--queue", arg, 0, 65535); break;
	case OPT_STATS: cfg.stats_path = arg; break;
	case OPT_LOG: cfg.log_path = arg; break;
	case OPT_SEED: cfg.seed = parse_uint("--seed", arg, 0, UINT64_MAX); break;
	case OPT_DELAY: single->delay_ms = parse_num("--delay", arg, 0, 1e6); break;
	case OPT_JITTER: single->jitter_cv = parse_num("--jitter", arg, 0, 1e3); break;
	case OPT_LOSS: single->loss = parse_num("--loss", arg, 0, 1); break;
	case OPT_LINK:
		if (*n_link_args >= 2)
			die_usage("--link: give it exactly twice (got more)");
		parse_link(arg, &cfg.links[(*n_link_args)++]);
		break;
	case OPT_BATCH: cfg.batch = parse_uint("--batch", arg, 1, 1000000000); break;
	case OPT_RATIO: parse_ratio(arg); break;
	case OPT_REORDER:
		cfg.reorder_timeout_ms = parse_num("--reorder-timeout", arg, 0, 1e6);
		break;
	case OPT_TRACE: cfg.trace_path = arg; break;
	case OPT_TRACE_BUFFER:
		cfg.trace_buffer = parse_uint("--trace-buffer", arg, 1, UINT64_MAX / 2);
		break;
	case OPT_PIN: parse_pin(arg); break;
	case OPT_RT_PRIORITY:
		cfg.rt_priority = (int)parse_uint("--rt-priority", arg, 0, 99);
		break;
	}
}

/* the mode follows from the options; options of another mode are refused */
static void check_mode(int n_link_args)
{
	unsigned single = GIVEN(OPT_DELAY) | GIVEN(OPT_JITTER) | GIVEN(OPT_LOSS);
	unsigned links = GIVEN(OPT_BATCH) | GIVEN(OPT_RATIO) | GIVEN(OPT_REORDER);

	if (!(given & GIVEN(OPT_QUEUE)))
		die_usage("--queue is required");
	if (n_link_args == 1)
		die_usage("--link: give it exactly twice (got once)");
	if (n_link_args == 2 && (given & (single | GIVEN(OPT_TRACE) | GIVEN(OPT_TRACE_BUFFER))))
		die_usage("--link: not with --delay, --jitter, --loss or --trace (each link has "
			  "its own)");
	if (n_link_args == 0 && (given & GIVEN(OPT_PIN)))
		die_usage("--pin: only with two --link (it pins a flow to one of them)");
	if (n_link_args == 0 && (given & links))
		die_usage("--batch, --ratio, --reorder-timeout: only with --link");
	if (!!(given & GIVEN(OPT_TRACE)) != !!(given & GIVEN(OPT_TRACE_BUFFER)))
		die_usage("--trace and --trace-buffer go together");
	cfg.n_links = n_link_args == 2 ? 2 : 1;
	cfg.mode = n_link_args == 2 ? MODE_LINKS : cfg.trace_path ? MODE_TRACE : MODE_DELAY;
}

static void parse_args(int argc, char **argv)
{
	int c, n_link_args = 0;

	opterr = 0; /* our own one-line messages */
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		if (c == '?' && optopt >= OPT_QUEUE)
			die_usage("'%s' needs a value", argv[optind - 1]);
		if (c == '?')
			die_usage("unknown option '%s'", argv[optind - 1]);
		parse_option(c, optarg, &n_link_args);
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	check_mode(n_link_args);
	if (cfg.mode == MODE_TRACE)
		load_trace(cfg.trace_path);
	if (!(given & GIVEN(OPT_SEED)) && getrandom(&cfg.seed, sizeof(cfg.seed), 0) < 0)
		cfg.seed = mono() ^ (uint64_t)getpid();
}

/* ---------------------------------------------------------------- main */

/* --rt-priority: SCHED_FIFO (reset on fork: nothing it starts inherits it); refused, the
 * reason goes to stderr and the stats, and the delay line runs on at the default policy. */
static void sched_setup(void)
{
	struct sched_param sp = { .sched_priority = cfg.rt_priority };

	if (cfg.rt_priority == 0)
		return;
	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) != 0) {
		snprintf(sched_error, sizeof(sched_error), "sched_setscheduler(SCHED_FIFO, %d): %s",
			 cfg.rt_priority, strerror(errno));
		fprintf(stderr, PROG ": --rt-priority: %s; running at the default policy\n",
			sched_error);
	}
}

static void open_log(void)
{
	static char buf[1 << 20];

	if (cfg.log_path == NULL)
		return;
	log_fp = fopen(cfg.log_path, "w");
	if (log_fp == NULL)
		die_usage("--log: %s: %s", cfg.log_path, strerror(errno));
	setvbuf(log_fp, buf, _IOFBF, sizeof(buf));
	fputs("arrival_ns,release_ns,size,link,fate,proto,src,sport,dst,dport\n", log_fp);
}

/* NFQA_TIMESTAMP comes only while the kernel timestamps packets, which it does while some
 * socket asks for timestamps: this one asks for the delay line's life (the kernel's count
 * drops when the process ends, however it ends). Refused: arrivals are timed when read. */
static void stamp_setup(void)
{
	int one = 1, fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) != 0)
		fprintf(stderr, PROG ": SO_TIMESTAMPNS: %s (arrivals are timed when read)\n",
			strerror(errno));
}

int main(int argc, char **argv)
{
	sigset_t wait_mask;

	parse_args(argc, argv);
	open_log();
	rng_seed(cfg.seed);
	ro.timeout_ns = ms_to_ns(cfg.reorder_timeout_ms);
	/* the default timer slack (50 us) would show in every release time */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	t_start = mono();
	realtime_offset = (int64_t)clock_ns(CLOCK_REALTIME) - (int64_t)t_start;
	if (cfg.mode == MODE_TRACE)
		tr.period = cfg.trace[cfg.trace_len - 1];
	recv_setup();
	stamp_setup();
	sched_setup();
	wait_mask = signals_setup();
	nl_bind_queue();
	printf("ready queue=%d\n", cfg.queue);
	fflush(stdout);
	loop(&wait_mask);
	if (log_fp && fclose(log_fp) != 0)
		perror(PROG ": --log");
	close(nl_fd);
	return 0;
}
