// SPDX-License-Identifier: MIT
/*
 * The drain thread itself (drain.h): its timer, adapted to how full the
 * rings run, the loop that makes a pass (drain.c) every tick, and the
 * calls of the main thread: set up, start, hand a process over, say one
 * is gone, stop, stats, free.
 *
 * The thread asks for a higher priority (--drain-nice, default -10; it
 * needs CAP_SYS_NICE and is skipped without): it runs for a millisecond
 * or so per tick, and on a busy host a pass preempted by CPU-bound work
 * took 80-100 ms instead of 10 (bench/RESULTS.md).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "agent/drain.h"
#include "agent/drain_int.h"
#include "common/atomic.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

static void arm(int fd, uint64_t ns)
{
	struct itimerspec its = {
		.it_value = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) },
		.it_interval = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) },
	};

	timerfd_settime(fd, 0, &its, NULL);
}

/*
 * Rings are overwrite rings: a producer that fills one before the next
 * tick loses its oldest records.  When a pass finds a ring more than a
 * quarter full, tick 8x faster (at least every millisecond) until the
 * rings run below that again; this costs nothing when producers are slow,
 * and only the drain ticks faster: batches are still sealed at most once
 * per flush interval (unless full).
 */
static void adapt_tick(struct drain *d)
{
	uint64_t fast = d->flush_ns / 8;
	int want = d->my.max_fill > 256;

	if (fast < 1000000)
		fast = 1000000;
	if (want == d->my.fast_tick || fast >= d->flush_ns)
		return;
	d->my.fast_tick = want;
	arm(d->tickfd, want ? fast : d->flush_ns);
	pr_debug("drain: tick %s (fullest ring %u/1024)", want ? "fast" : "normal",
		 d->my.max_fill);
}

static void *drain_main(void *arg)
{
	struct drain *d = arg;
	struct pollfd pfd[2] = {
		{ .fd = d->tickfd, .events = POLLIN },
		{ .fd = d->wakefd, .events = POLLIN },
	};

	if (d->nice && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), d->nice))
		pr_debug("drain: cannot set nice %d: %s (running at the agent's priority)",
			 d->nice, errstr(errno));
	arm(d->tickfd, d->flush_ns);
	for (;;) {
		uint64_t v, t0;
		int stop;

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (read(d->tickfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			break;
		if (read(d->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			break;
		pthread_mutex_lock(&d->lock);
		stop = d->stop;
		pthread_mutex_unlock(&d->lock);
		t0 = clock_monotonic_ns();
		drain_pass(d, t0);
		t0 = clock_monotonic_ns() - t0;
		if (t0 > d->my.max_pass_ns)
			d->my.max_pass_ns = t0;
		if (stop)
			break;
		adapt_tick(d);
	}
	if (d->cur && !d->cur->b.count && !d->cur->retired) {
		bqueue_put_back(d->q, d->cur);
		d->cur = NULL;
	} else if (d->cur) {
		drain_seal(d, clock_monotonic_ns());
	}
	drain_publish(d);
	pthread_mutex_lock(&d->lock);
	d->done = 1;
	pthread_mutex_unlock(&d->lock);
	/* Wake the main thread: it waits for done with the queue empty. */
	bqueue_wake(d->q);
	return NULL;
}

int drain_init(struct drain *d, struct bqueue *q, uint64_t flush_ns)
{
	memset(d, 0, sizeof(*d));
	d->q = q;
	d->flush_ns = flush_ns;
	d->tickfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	d->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->tickfd < 0 || d->wakefd < 0) {
		int ret = -errno;

		if (d->tickfd >= 0)
			close(d->tickfd);
		if (d->wakefd >= 0)
			close(d->wakefd);
		d->tickfd = d->wakefd = -1;
		return ret;
	}
	return -pthread_mutex_init(&d->lock, NULL);
}

int drain_start(struct drain *d)
{
	int ret = -pthread_create(&d->thread, NULL, drain_main, d);

	if (!ret)
		d->started = 1;
	return ret;
}

static void wake(struct drain *d)
{
	uint64_t one = 1;

	if (write(d->wakefd, &one, sizeof(one)) < 0) {
		/* EAGAIN: saturated, the thread is awake anyway. */
	}
}

void drain_add(struct drain *d, struct proc *p)
{
	pthread_mutex_lock(&d->lock);
	p->dnext = d->incoming;
	d->incoming = p;
	pthread_mutex_unlock(&d->lock);
}

void drain_gone(struct drain *d, struct proc *p, const char *why)
{
	if (p->gone_why)
		return;
	smp_store_release(&p->gone_why, why);
	wake(d);
}

void drain_stop(struct drain *d)
{
	pthread_mutex_lock(&d->lock);
	d->stop = 1;
	pthread_mutex_unlock(&d->lock);
	wake(d);
}

int drain_done(struct drain *d)
{
	int done;

	pthread_mutex_lock(&d->lock);
	done = d->done || !d->started;
	pthread_mutex_unlock(&d->lock);
	return done;
}

void drain_get_stats(struct drain *d, struct drain_stats *st)
{
	pthread_mutex_lock(&d->lock);
	*st = d->st;
	pthread_mutex_unlock(&d->lock);
}

void drain_free(struct drain *d)
{
	if (!d || d->tickfd < 0)
		return;
	if (d->started) {
		drain_stop(d);
		pthread_join(d->thread, NULL);
		d->started = 0;
	}
	if (d->cur) {
		bqueue_put_back(d->q, d->cur);
		d->cur = NULL;
	}
	close(d->tickfd);
	close(d->wakefd);
	d->tickfd = d->wakefd = -1;
	pthread_mutex_destroy(&d->lock);
}
