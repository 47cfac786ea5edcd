// SPDX-License-Identifier: MIT
/*
 * The ingest threads: the store's writers.
 *
 * Connection threads (wire agents, HTTP POSTs) queue jobs and sleep until
 * theirs is done.  A writer takes every waiting batch at once (up to
 * INGEST_GROUP_SPANS spans) and stores them with ONE store__write(): one
 * transaction, one COMMIT for many batches (group commit).  Only then are
 * the jobs marked done, so an ACK is never sent before its COMMIT.  A
 * failed transaction fails every job in it (the agents resend; nothing of
 * them was stored).
 *
 * Writers: one for SQLite (one write transaction at a time); with
 * ClickHouse, --clickhouse-writers (default 2, at most what
 * store__writers() allows), each taking the next group while the others'
 * INSERTs run, so the collector prepares a write while the server stores
 * the one before and both cores work.  A connection has one chain in the
 * store's hands at a time, so what a connection sent is still committed
 * in order; groups of different connections may commit in either order.
 *
 * Linger (--clickhouse-linger, --clickhouse-batch): a store whose every
 * write has a fixed cost (ClickHouse makes a part of each table per
 * INSERT) is written in fewer, larger writes: once a job is queued the
 * writer waits, up to c->write_linger_ns after that job arrived, for
 * c->write_batch spans to gather, and stops waiting early when every
 * sender it knows of already has a batch queued (each waits for its
 * answer, so nothing more can come from them): the connected agents, and
 * as many HTTP and gRPC senders (OTLP, Zipkin) as were in the store's
 * hands at once in the last INGEST_PEAK_NS (they have no session to count
 * them by; one OTLP exporter on one connection is then 1, and its
 * requests never wait for the linger).  The ACKs still follow the write
 * that contains their batch: the guarantees are the same, only later.
 *
 * While the store's disk is low (store__write_gate(), its watermark),
 * batches are refused before they are queued: agents get a NACK and keep
 * them in their spool, HTTP and gRPC senders 503 / UNAVAILABLE.
 *
 * Retention runs on the same thread between groups, in chunks of
 * INGEST_RETAIN_CHUNK rows, so a large delete never holds the writer for
 * long.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/collector_int.h"
#include "collector/ext_http.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/heap.h"
#include "common/log.h"

#define INGEST_GROUP_SPANS  200000
#define INGEST_GROUP_JOBS   256
#define INGEST_CHAIN_MAX    64     /* batches ingest_write_chain() takes */
#define INGEST_RETAIN_CHUNK 5000
#define INGEST_WRITERS_MAX  8
#define INGEST_PEAK_NS      1000000000ull /* how long an HTTP/gRPC sender
					     is remembered (linger above) */

enum job_type { JOB_BATCH, JOB_HELLO, JOB_STATS };

struct job {
	enum job_type type;
	struct store_batch *b;
	const char *agent_id, *host, *version, *json;
	uint64_t last_seq;
	int ret;
	char err[256];
	int done;
	uint64_t queued_ns;         /* when it was queued (monotonic) */
	int chained;                /* goes in the same group as the job before */
	int other;                  /* a batch of an HTTP or gRPC sender, not an agent */
	struct job *next;
};

struct ingest {
	struct collector *c;
	pthread_t threads[INGEST_WRITERS_MAX];
	unsigned nthreads;
	pthread_mutex_t lock;
	pthread_cond_t wake;        /* writer: work queued or stop */
	pthread_cond_t done;        /* submitters: some job finished */
	struct job *head, **tail;
	int stop;
	uint64_t next_retain_ns;
	size_t queued_spans;        /* of batches submitted and not yet done
				       (changed under lock, read without) */
	size_t waiting_spans;       /* of batches queued and not yet taken */
	size_t waiting_senders;     /* submitters of batches queued and not
				       taken (a chain of batches is one) */
	size_t writing_senders;     /* ... taken by a writer, not yet done */
	size_t others;              /* HTTP/gRPC senders with a batch queued
				       or being written */
	size_t others_peak;         /* the most of them at once since ... */
	uint64_t others_peak_ns;    /* ... this time (monotonic) */
	unsigned writing;           /* groups of batches taken, not yet done */
};

/* A writer thread's start: which one it is. */
struct writer_arg {
	struct ingest *in;
	unsigned no;                /* 0 also runs retention */
};

static uint64_t retain_interval_ns(const struct collector *c)
{
	uint64_t ns = c->retention_us * 1000 / 20;

	if (ns < 1000000000ull)
		ns = 1000000000ull;
	if (ns > 60000000000ull)
		ns = 60000000000ull;
	return ns;
}

/* Delete what is older than the retention, a chunk at a time, as long as
 * no job waits. */
static void retain(struct ingest *in)
{
	struct collector *c = in->c;
	uint64_t cutoff = clock_realtime_ns() / 1000 - c->retention_us;
	int n;

	do {
		n = store__retain(c->store, cutoff, INGEST_RETAIN_CHUNK);
		if (n > 0)
			M_ADD(c, retention_deleted, (uint64_t)n);
		else if (n < 0)
			M_ADD(c, store_errors, 1);
	} while (n > 0 && !__atomic_load_n(&in->head, __ATOMIC_RELAXED));
	if (n <= 0)
		in->next_retain_ns = clock_monotonic_ns() + retain_interval_ns(c);
}

/* The HTTP/gRPC senders seen at once lately (the linger above): the peak
 * of in->others over the last INGEST_PEAK_NS, taken anew when it is
 * older; with in->lock held. */
static size_t others_known(struct ingest *in, uint64_t now_ns)
{
	if (in->others >= in->others_peak || now_ns - in->others_peak_ns > INGEST_PEAK_NS) {
		in->others_peak = in->others;
		in->others_peak_ns = now_ns;
	}
	return in->others_peak;
}

/* Whether the writer should wait for more before taking a group (the
 * linger above); called with in->lock held and a job queued. */
static int linger(struct ingest *in, uint64_t now_ns)
{
	const struct collector *c = in->c;
	uint64_t senders = __atomic_load_n(&c->m.agents_connected, __ATOMIC_RELAXED) +
			   others_known(in, now_ns);

	if (!c->write_linger_ns || in->stop || in->head->type != JOB_BATCH)
		return 0;
	if (in->waiting_spans >= c->write_batch)
		return 0;
	/* the senders another writer has are waiting for their answers too */
	if (senders && in->waiting_senders + in->writing_senders >= senders)
		return 0;
	return now_ns < in->head->queued_ns + c->write_linger_ns;
}

static void run_group(struct ingest *in, struct job *jobs)
{
	struct store_batch *bs[INGEST_GROUP_JOBS + INGEST_CHAIN_MAX];
	struct job *j;
	size_t nb = 0;
	char err[256];
	int ret = 0;

	for (j = jobs; j; j = j->next) {
		switch (j->type) {
		case JOB_HELLO: {
			struct store_disk d;

			/* the disk low: no write (a full disk would refuse it
			 * and the agent could not connect to be NACKed), only
			 * the agent's last committed seq */
			store__disk(in->c->store, &d);
			if (d.low)
				j->ret = store__agent_last_seq(in->c->store, j->agent_id,
							       &j->last_seq);
			else
				j->ret = store__agent_hello(in->c->store, j->agent_id, j->host,
							    j->version, &j->last_seq);
			break;
		}
		case JOB_STATS:
			j->ret = store__agent_stats(in->c->store, j->agent_id, j->json);
			break;
		case JOB_BATCH:
			bs[nb++] = j->b;
			break;
		}
		if (j->type != JOB_BATCH && j->ret) {
			M_ADD(in->c, store_errors, 1);
			snprintf(j->err, sizeof(j->err), "store: %s", errstr(j->ret));
		}
	}
	if (nb) {
		ret = store__write(in->c->store, bs, nb, err, sizeof(err));
		if (ret) {
			M_ADD(in->c, store_errors, 1);
			pr_warn("ingest: %zu batches not stored: %s", nb, err);
		} else {
			M_ADD(in->c, store_writes, 1);
			coll_ext_committed(in->c, bs, nb); /* --export */
		}
	}
	for (j = jobs; j; j = j->next) {
		if (j->type != JOB_BATCH)
			continue;
		j->ret = ret;
		if (ret)
			snprintf(j->err, sizeof(j->err), "%s", err);
	}
}

static void *writer_main(void *arg)
{
	struct writer_arg *wa = arg;
	struct ingest *in = wa->in;
	unsigned no = wa->no;

	free(wa);
	pthread_mutex_lock(&in->lock);
	for (;;) {
		struct job *group, *j, **pp;
		size_t spans = 0, njobs = 0, senders = 0;
		int batches = 0;

		while (!in->head && !in->stop) {
			uint64_t now = clock_monotonic_ns();
			struct timespec ts;
			uint64_t until;

			if (!no && in->c->retention_us && now >= in->next_retain_ns) {
				pthread_mutex_unlock(&in->lock);
				retain(in);
				pthread_mutex_lock(&in->lock);
				continue;
			}
			until = clock_realtime_ns() + (!no && in->c->retention_us ?
				in->next_retain_ns - now : 60000000000ull);
			ts.tv_sec = (time_t)(until / 1000000000u);
			ts.tv_nsec = (long)(until % 1000000000u);
			pthread_cond_timedwait(&in->wake, &in->lock, &ts);
		}
		if (!in->head && in->stop)
			break;
		for (;;) {
			uint64_t now = clock_monotonic_ns(), until;
			struct timespec ts;

			if (!in->head || !linger(in, now))
				break;
			/* until the linger ends, or the senders seen lately
			 * are forgotten (fewer may be waited for then) */
			until = in->head->queued_ns + in->c->write_linger_ns;
			if (in->others_peak > in->others &&
			    in->others_peak_ns + INGEST_PEAK_NS + 1 < until)
				until = in->others_peak_ns + INGEST_PEAK_NS + 1;
			until = clock_realtime_ns() + (until - now);
			ts.tv_sec = (time_t)(until / 1000000000u);
			ts.tv_nsec = (long)(until % 1000000000u);
			pthread_cond_timedwait(&in->wake, &in->lock, &ts);
		}
		if (!in->head)
			continue;   /* another writer took it while this one waited */
		/* Take a group off the queue. */
		group = in->head;
		pp = &in->head;
		/* never split a chain (ingest_write_chain()): it is all or
		 * nothing */
		while (*pp && ((*pp)->chained || (njobs < INGEST_GROUP_JOBS &&
						  (!njobs || spans < INGEST_GROUP_SPANS)))) {
			j = *pp;
			if (j->type == JOB_BATCH) {
				spans += j->b->nspans + j->b->nparts;
				senders += !j->chained;
				batches = 1;
			}
			njobs++;
			pp = &j->next;
		}
		in->head = *pp;
		*pp = NULL;
		if (!in->head)
			in->tail = &in->head;
		in->waiting_spans -= spans;
		in->waiting_senders -= senders;
		in->writing_senders += senders;
		if (batches) {
			if (in->writing)
				M_ADD(in->c, store_writes_overlapped, 1);
			in->writing++;
		}
		if (in->head)   /* more for another writer */
			pthread_cond_signal(&in->wake);
		pthread_mutex_unlock(&in->lock);

		run_group(in, group);
		/* what decoding and storing the group freed, in every
		 * thread's arena, back to the system (common/heap.h) */
		heap_trim_maybe(clock_monotonic_ns());

		pthread_mutex_lock(&in->lock);
		for (j = group; j;) {
			struct job *next = j->next;

			if (j->type == JOB_BATCH)
				__atomic_sub_fetch(&in->queued_spans, j->b->nspans + j->b->nparts,
						   __ATOMIC_RELAXED);
			if (j->other)
				in->others--;
			j->done = 1; /* after this, j may be gone */
			j = next;
		}
		in->writing_senders -= senders;
		in->writing -= (unsigned)batches;
		pthread_cond_broadcast(&in->done);
	}
	pthread_mutex_unlock(&in->lock);
	return NULL;
}

struct ingest *ingest_new(struct collector *c)
{
	struct ingest *in = calloc(1, sizeof(*in));
	unsigned n;
	int ret;

	if (!in)
		return fay_err_ptr(-ENOMEM);
	in->c = c;
	in->tail = &in->head;
	pthread_mutex_init(&in->lock, NULL);
	pthread_cond_init(&in->wake, NULL);
	pthread_cond_init(&in->done, NULL);
	/* first retention pass soon after start */
	in->next_retain_ns = clock_monotonic_ns() + 1000000000ull;
	n = c->writers ? c->writers : 1;
	if (n > INGEST_WRITERS_MAX)
		n = INGEST_WRITERS_MAX;
	for (unsigned i = 0; i < n; i++) {
		struct writer_arg *wa = malloc(sizeof(*wa));

		ret = wa ? 0 : ENOMEM;
		if (wa) {
			*wa = (struct writer_arg){ .in = in, .no = i };
			ret = pthread_create(&in->threads[i], NULL, writer_main, wa);
			if (ret)
				free(wa);
		}
		if (ret) {
			ingest_free(in);
			return fay_err_ptr(-ret);
		}
		in->nthreads++;
	}
	return in;
}

void ingest_free(struct ingest *in)
{
	if (!in)
		return;
	pthread_mutex_lock(&in->lock);
	in->stop = 1;
	pthread_cond_broadcast(&in->wake);
	pthread_mutex_unlock(&in->lock);
	for (unsigned i = 0; i < in->nthreads; i++)
		pthread_join(in->threads[i], NULL);
	pthread_mutex_destroy(&in->lock);
	pthread_cond_destroy(&in->wake);
	pthread_cond_destroy(&in->done);
	free(in);
}

/* Queue the n jobs of v (chained after the first) and wait for the
 * writer to finish them.  With cap, jobs that would take the spans
 * waiting past cap are refused (-EAGAIN) instead; jobs alone in the queue
 * are always taken.  Batches are refused (-ENOSPC, the reason in the last
 * job's err) while the store's disk is low (store__write_gate()). */
static int submit_n(struct ingest *in, struct job *v, size_t nj, size_t cap)
{
	struct job *j = &v[nj - 1];
	size_t n = 0;

	for (size_t i = 0; i < nj; i++)
		if (v[i].type == JOB_BATCH)
			n += v[i].b->nspans + v[i].b->nparts;
	/* the disk watermark (store.h): spans wait in their senders */
	if (n && store__write_gate(in->c->store, j->err, sizeof(j->err))) {
		M_ADD(in->c, disk_low_refused, 1);
		return -ENOSPC;
	}
	pthread_mutex_lock(&in->lock);
	if (in->stop) {
		pthread_mutex_unlock(&in->lock);
		snprintf(j->err, sizeof(j->err), "collector shutting down");
		return -ESHUTDOWN;
	}
	if (cap && in->queued_spans && in->queued_spans + n > cap) {
		snprintf(j->err, sizeof(j->err), "ingest queue full: %zu spans waiting for the "
			 "store, at most %zu (--ingest-queue)", in->queued_spans, cap);
		pthread_mutex_unlock(&in->lock);
		return -EAGAIN;
	}
	__atomic_add_fetch(&in->queued_spans, n, __ATOMIC_RELAXED); /* under lock; read by /metrics */
	in->waiting_spans += n;
	if (v[0].other && ++in->others >= in->others_peak) {
		in->others_peak = in->others;
		in->others_peak_ns = clock_monotonic_ns();
	}
	for (size_t i = 0; i < nj; i++) {
		if (v[i].type == JOB_BATCH && !i)
			in->waiting_senders++;
		v[i].queued_ns = clock_monotonic_ns();
		v[i].chained = i > 0;
		*in->tail = &v[i];
		in->tail = &v[i].next;
	}
	pthread_cond_signal(&in->wake);
	while (!j->done)    /* the last is done once all are (one group) */
		pthread_cond_wait(&in->done, &in->lock);
	pthread_mutex_unlock(&in->lock);
	return j->ret;
}

static int submit(struct ingest *in, struct job *j, size_t cap)
{
	return submit_n(in, j, 1, cap);
}

int ingest_write(struct ingest *in, struct store_batch *b, char *err, size_t errlen)
{
	struct job j = { .type = JOB_BATCH, .b = b, .other = 1 };
	int ret = submit(in, &j, 0);

	if (ret)
		snprintf(err, errlen, "%s", j.err);
	return ret;
}

int ingest_write_chain(struct ingest *in, struct store_batch **b, size_t n, char *err,
		       size_t errlen)
{
	struct job v[INGEST_CHAIN_MAX] = { 0 };
	int ret;

	if (!n || n > INGEST_CHAIN_MAX) {
		snprintf(err, errlen, "%zu batches in one chain (1 to %d)", n, INGEST_CHAIN_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		v[i].type = JOB_BATCH;
		v[i].b = b[i];
	}
	ret = submit_n(in, v, n, 0);
	if (ret)
		snprintf(err, errlen, "%s", v[n - 1].err[0] ? v[n - 1].err : v[0].err);
	return ret;
}

int ingest_try_write(struct ingest *in, struct store_batch *b, char *err, size_t errlen)
{
	struct job j = { .type = JOB_BATCH, .b = b, .other = 1 };
	int ret = submit(in, &j, in->c->ingest_queue);

	if (ret)
		snprintf(err, errlen, "%s", j.err);
	return ret;
}

int ingest_hello(struct ingest *in, const char *agent_id, const char *host,
		 const char *version, uint64_t *last_seq)
{
	struct job j = { .type = JOB_HELLO, .agent_id = agent_id, .host = host,
			 .version = version };
	int ret = submit(in, &j, 0);

	*last_seq = j.last_seq;
	return ret;
}

int ingest_stats(struct ingest *in, const char *agent_id, const char *json)
{
	struct job j = { .type = JOB_STATS, .agent_id = agent_id, .json = json };

	return submit(in, &j, 0);
}

size_t ingest_queued(struct ingest *in)
{
	return __atomic_load_n(&in->queued_spans, __ATOMIC_RELAXED);
}
