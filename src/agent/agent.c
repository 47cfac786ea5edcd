// SPDX-License-Identifier: MIT
/*
 * `fay agent`: two threads.
 *
 * The drain thread (drain.c) reads the rings into sealed in-memory batches
 * and does nothing else: no file, /proc or socket I/O can hold up a drain.
 *
 * The main thread runs one epoll loop.  Sources:
 *   eventfd (queue)  sealed batches: write each to the spool, then retire
 *                    the processes whose last records it holds
 *   timerfd (tick)   housekeeping: retry a spool write that failed, save
 *                    the cursor file now and then, check owners, connect,
 *                    stats
 *   timerfd (retry)  files seen but not ready yet (INIT, too small)
 *   inotify          new fay-*.shm files in the shm directory
 *   pidfd per file   its process exited: tell the drain thread
 *   socket           the collector (ship.c)
 *   signalfd         SIGTERM/SIGINT: last drain, spool, ship for up to 2 s
 * This file sets the loop up, runs and ends it; agent_files.c finds and
 * follows the shm files, agent_spool.c spools batches and makes the stats
 * (agent_int.h holds what they share).
 * The durability protocol (spool before anything depends on a batch; the
 * cursor file saved before a spool file it supersedes is deleted) is
 * described in agent.h and docs/ABI.md section 5.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "agent/qclient.h"
#include "agent/shmfile.h"
#include "agent/flight.h"
#include "agent/keepreg.h"
#include "agent/spantap.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/net.h"
#include "common/file_atomic.h"
#include "common/rand.h"
#include "common/secret.h"
#include "common/tls.h"
#include "common/version.h"

#define HOUSE_TICK_MAX_NS  (100 * 1000000ull)
#define SHUTDOWN_SEND_NS   (2 * 1000000000ull)

/* ---- helpers ------------------------------------------------------------- */

/* state-dir/agent_id: 32 hex digits, made once. */
static int load_agent_id(struct agent *a)
{
	char path[PATH_MAX], buf[64] = "";
	uint8_t id[16];
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "%s/agent_id", a->o->state_dir);
	f = fopen(path, "re");
	if (f) {
		int good = fgets(buf, sizeof(buf), f) && strspn(buf, "0123456789abcdef") == 32;

		fclose(f);
		if (good) {
			memcpy(a->agent_id, buf, 32);
			a->agent_id[32] = '\0';
			return 0;
		}
		pr_warn("%s is not 32 hex digits; making a new agent id", path);
	}
	ret = rand_bytes(id, sizeof(id));
	if (ret)
		return ret;
	for (int i = 0; i < 16; i++)
		snprintf(a->agent_id + 2 * i, 3, "%02x", id[i]);
	snprintf(buf, sizeof(buf), "%s\n", a->agent_id);
	return file_write_atomic(path, buf, 33, 0600, 0);
}

void agent_arm_timer(int fd, uint64_t first_ns, uint64_t interval_ns)
{
	struct itimerspec its = {
		.it_value = { (time_t)(first_ns / 1000000000u), (long)(first_ns % 1000000000u) },
		.it_interval = { (time_t)(interval_ns / 1000000000u),
				 (long)(interval_ns % 1000000000u) },
	};

	timerfd_settime(fd, 0, &its, NULL);
}

/* ---- the loop ------------------------------------------------------------- */

static void on_tick(struct agent *a, uint64_t now)
{
	uint64_t exp;

	if (read(a->tickfd, &exp, sizeof(exp)) < 0 && errno != EAGAIN)
		return;
	if (a->spool_blocked || a->hold_spool)
		agent_on_queue(a, now);
	agent_check_owners(a, now);
	agent_scan_roots(a, now);
	if (a->pending)
		agent_retry_pending(a, now);
	ship_tick(&a->ship, now);
	agent_maybe_save(a, now, 0);
	if (now >= a->next_stats_ns) {
		agent_do_stats(a, now, 1);
		a->next_stats_ns = now + a->o->stats_ns;
	}
}

static int setup(struct agent *a)
{
	struct epoll_event ev = { .events = EPOLLIN };
	char path[PATH_MAX], err[300];
	sigset_t ss;
	int ret;

	a->epfd = a->tickfd = a->retryfd = a->inofd = a->sigfd = a->lockfd = -1;
	a->ev_tick.type = EV_TICK;
	a->ev_retry.type = EV_RETRY;
	a->ev_ino.type = EV_INOTIFY;
	a->ev_sig.type = EV_SIGNAL;
	a->ev_sock.type = EV_SOCK;
	a->ev_queue.type = EV_QUEUE;
	a->start_ns = clock_monotonic_ns();
	if (getenv("FAY_AGENT_CRASH_AFTER_SPOOL"))
		a->crash_after_spool = atol(getenv("FAY_AGENT_CRASH_AFTER_SPOOL"));
	a->hold_spool = getenv("FAY_AGENT_TEST_HOLD_SPOOL");

	ret = agent_mkdir_p(a->o->state_dir);
	if (ret) {
		pr_err("cannot create state directory %s: %s", a->o->state_dir, errstr(ret));
		return ret;
	}
	snprintf(path, sizeof(path), "%s/lock", a->o->state_dir);
	a->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (a->lockfd < 0 || flock(a->lockfd, LOCK_EX | LOCK_NB)) {
		ret = -errno;
		pr_err("state directory %s is in use by another fay agent (%s): %s",
		       a->o->state_dir, path, errstr(ret));
		return ret;
	}
	ret = load_agent_id(a);
	if (ret) {
		pr_err("cannot make %s/agent_id: %s", a->o->state_dir, errstr(ret));
		return ret;
	}
	snprintf(a->cursors_path, sizeof(a->cursors_path), "%s/cursors", a->o->state_dir);
	snprintf(a->stats_path, sizeof(a->stats_path), "%s/stats.json", a->o->state_dir);
	ret = cursor_load(a->cursors_path, &a->cursors, err, sizeof(err));
	if (ret == -EBADMSG) {
		pr_err("%s; starting without saved cursors (rings are read from their oldest record)",
		       err);
	} else if (ret) {
		pr_err("cannot read %s: %s", a->cursors_path, errstr(ret));
		return ret;
	}
	snprintf(path, sizeof(path), "%s/spool", a->o->state_dir);
	ret = spool_open(&a->spool, path, a->cursors_path, a->o->spool_max, a->o->fsync,
			 &a->cursors);
	if (ret) {
		pr_err("cannot open the spool %s: %s", path, errstr(ret));
		return ret;
	}
	/* spool_open moved cursors.seq up to the newest spooled batch.
	 * Batches drained but never spooled may have had higher seqs: they
	 * were never sent, so those seqs are free again. */
	a->next_seq = a->cursors.seq + 1;
	ret = bqueue_init(&a->q, (uint32_t)(a->o->queue_max / BATCH_MAX_BYTES));
	if (ret) {
		pr_err("cannot set up the batch queue: %s", errstr(ret));
		return ret;
	}
	a->q_ready = 1;
	ret = drain_init(&a->drain, &a->q, a->o->flush_ns);
	if (ret) {
		pr_err("cannot set up the drain thread: %s", errstr(ret));
		return ret;
	}
	a->drain_ready = 1;
	a->drain.nice = a->o->drain_nice;
	a->tap = spantap_new();
	if (!a->tap)
		pr_warn("cannot set up the span tap: %s; spans(...) queries will not run here",
			errstr(-errno));
	a->drain.tap = a->tap;
	a->keeps = keepreg_new();
	if (!a->keeps)
		pr_warn("cannot set up keep mode: %s; queries in keep mode will not run here",
			errstr(-errno));
	if (a->o->flight_bytes) {
		a->flight = flight_new(a->o->flight_bytes);
		if (!a->flight) {
			pr_err("cannot set up the flight buffer (--flight): %s", errstr(-errno));
			return -errno;
		}
		a->drain.flight = a->flight;
		pr_info("flight buffer: %" PRIu64 " bytes for the spans head sampling did not "
			"choose (FAY_RECORD=all)", a->o->flight_bytes);
	}

	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	a->tickfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	a->retryfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	a->inofd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (a->epfd < 0 || a->tickfd < 0 || a->retryfd < 0 || a->inofd < 0) {
		ret = -errno;
		pr_err("cannot set up the event loop: %s", errstr(ret));
		return ret;
	}
	if (mkdir(a->o->shm_dir, 01777) && errno != EEXIST) {
		ret = -errno;
		pr_err("cannot create shm directory %s: %s", a->o->shm_dir, errstr(ret));
		return ret;
	}
	ret = agent_dirs_init(a);
	if (ret)
		return ret;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGHUP);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);
	a->sigfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
	if (a->sigfd < 0) {
		ret = -errno;
		pr_err("signalfd: %s", errstr(ret));
		return ret;
	}
	ev.data.ptr = &a->ev_tick;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->tickfd, &ev);
	ev.data.ptr = &a->ev_retry;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->retryfd, &ev);
	ev.data.ptr = &a->ev_ino;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->inofd, &ev);
	ev.data.ptr = &a->ev_sig;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->sigfd, &ev);
	ev.data.ptr = &a->ev_queue;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->q.efd, &ev);

	{
		struct wire_hello hm = { 0 };

		uint64_t sess[2] = { rand_u64(), rand_u64() };

		snprintf(hm.agent_id, sizeof(hm.agent_id), "%s", a->agent_id);
		snprintf(hm.version, sizeof(hm.version), "%s", FAY_VERSION);
		/* this process's: the collector tells our reconnects from another
		 * agent that has our id (a cloned state directory) */
		snprintf(hm.session, sizeof(hm.session), "%016" PRIx64 "%016" PRIx64,
			 sess[0], sess[1]);
		if (strlen(a->o->host) >= sizeof(hm.host) ||
		    (a->o->token && strlen(a->o->token) >= sizeof(hm.token))) {
			pr_err("%s is longer than %zu bytes", strlen(a->o->host) >= sizeof(hm.host) ?
			       "the host name" : "the token", sizeof(hm.host) - 1);
			return -EINVAL;
		}
		snprintf(hm.host, sizeof(hm.host), "%s", a->o->host);
		snprintf(hm.token, sizeof(hm.token), "%s", a->o->token ? a->o->token : "");
		{
			/* The HELLO is JSON: refuse now what it cannot carry. */
			struct wire_buf wb = { 0 };

			ret = wire_put_hello(&wb, &hm);
			wire_buf_free(&wb);
			if (ret) {
				pr_err("the host name or the token cannot be sent (not UTF-8?)");
				return -EINVAL;
			}
		}
		ret = ship_init(&a->ship, a->o->collector, &hm, &a->spool,
				&a->next_seq, a->epfd, &a->ev_sock);
		a->ship.tls = a->o->tls;
		if (ret == -ENOMEM)
			return ret;
		if (ret) {
			pr_err("bad collector address '%s' (want HOST:PORT)", a->o->collector);
			return ret;
		}
	}
	pr_info("agent %s on %s: shm %s, state %s, collector %s, %" PRIu64
		" batches (%" PRIu64 " bytes) spooled, next batch %" PRIu64 ", %u MiB of batch buffers",
		a->agent_id, a->o->host, a->o->shm_dir, a->o->state_dir, a->o->collector,
		a->spool.nbatches, a->spool.bytes, a->next_seq, a->q.max);
	return 0;
}

static void free_dead(struct agent *a)
{
	while (a->dead) {
		struct proc *p = a->dead;

		a->dead = p->next;
		agent_proc_free(a, p);
	}
}

static void teardown(struct agent *a)
{
	qclient_stop(a->qc);	/* every query's probes detached */
	/* The drain thread first: it may still be reading the procs. */
	if (a->drain_ready)
		drain_free(&a->drain);
	spantap_free(a->tap);	/* no query and no drain feeds it now */
	a->tap = NULL;
	flight_free(a->flight);	/* nor adds to or captures from this */
	a->flight = NULL;
	keepreg_free(a->keeps);	/* every runner removed its buffer */
	a->keeps = NULL;
	free_dead(a);
	while (a->procs) {
		struct proc *p = a->procs;

		a->procs = p->next;
		agent_proc_free(a, p);
	}
	while (a->pending) {
		struct pending *q = a->pending;

		a->pending = q->next;
		free(q);
	}
	while (a->bad) {
		struct badfile *b = a->bad;

		a->bad = b->next;
		free(b);
	}
	agent_dirs_free(a);
	ship_free(&a->ship);
	spool_close(&a->spool);
	if (a->q_ready)
		bqueue_free(&a->q);
	cursor_tab_free(&a->cursors);
	for (int *fd = &a->epfd; fd <= &a->sigfd; fd++)
		if (*fd >= 0)
			close(*fd);
	if (a->lockfd >= 0)
		close(a->lockfd);
}


/* SIGHUP: the token file and the TLS files again, for the next HELLOs and
 * handshakes (the connections open now keep theirs). */
static void reload(struct agent *a)
{
	char tok[512], why[600] = "";

	if (a->o->token_file) {
		if (secret_file_token(a->o->token_file, tok, sizeof(tok), why, sizeof(why)) ||
		    strlen(tok) >= sizeof(a->ship.hello.token)) {
			pr_warn("reload: --token-file refused, the token stays as it was: %s",
				*why ? why : "longer than a HELLO carries");
		} else {
			snprintf(a->ship.hello.token, sizeof(a->ship.hello.token), "%s", tok);
			qclient_set_token(a->qc, tok);
			pr_info("reload: --token-file %s read again; the next HELLO sends it",
				a->o->token_file);
		}
		explicit_bzero(tok, sizeof(tok));
	}
	if (a->o->tls) {
		if (tls_conf_reload(a->o->tls, a->o->tls_cert, a->o->tls_key, a->o->tls_ca, why,
				    sizeof(why)))
			pr_warn("reload: TLS files refused, new connections go on with the old ones: %s",
				why);
		else
			pr_info("reload: TLS files read again; new connections use them");
	}
}
int agent_run(const struct agent_opts *o)
{
	struct agent a = { .o = o };
	struct epoll_event evs[32];
	uint64_t house = o->flush_ns < HOUSE_TICK_MAX_NS ? o->flush_ns : HOUSE_TICK_MAX_NS;
	int ret;

	ret = setup(&a);
	if (ret)
		goto out;
	ret = shm_guard_install();
	if (ret) {
		pr_err("cannot install the SIGBUS handler: %s", errstr(ret));
		goto out;
	}
	net_raise_nofile();	/* a pidfd per traced process, spool files */
	ret = drain_start(&a.drain);
	if (ret) {
		pr_err("cannot start the drain thread: %s", errstr(ret));
		goto out;
	}
	/* Already-present files, then promptly through inotify. */
	agent_scan_dir(&a, a.dirs, clock_monotonic_ns());
	agent_scan_roots(&a, clock_monotonic_ns());
	agent_prune_cursors(&a);
	agent_maybe_save(&a, clock_monotonic_ns(), 1);
	agent_arm_timer(a.tickfd, house, house);
	a.next_stats_ns = clock_monotonic_ns() + o->stats_ns;
	ship_tick(&a.ship, clock_monotonic_ns());
	{
		struct qclient_opts qo = {
			.collector = o->collector, .host = o->host,
			.agent_id = a.agent_id, .token = o->token, .tls = o->tls, .tap = a.tap,
			.allow_other_users = o->allow_other_users,
			.inject_lib = o->inject_lib, .no_inject = o->no_inject,
			.flight = a.flight, .keeps = a.keeps,
			.cgroup = o->cgroup,
			.shm_dir = o->shm_dir,
		};

		a.qc = qclient_start(&qo);
		if (!a.qc)
			pr_warn("cannot start the query connection: %s; cluster queries will not run here",
				errstr(-errno));
	}

	for (;;) {
		int n = epoll_wait(a.epfd, evs, 32, 1000);
		uint64_t now = clock_monotonic_ns();

		if (n < 0 && errno != EINTR) {
			ret = -errno;
			pr_err("epoll_wait: %s", errstr(ret));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct evsrc *src = evs[i].data.ptr;

			switch (src->type) {
			case EV_TICK:
				on_tick(&a, now);
				break;
			case EV_QUEUE:
				agent_on_queue(&a, now);
				break;
			case EV_RETRY: {
				uint64_t exp;

				if (read(a.retryfd, &exp, sizeof(exp)) < 0 && errno != EAGAIN)
					break;
				agent_retry_pending(&a, now);
				break;
			}
			case EV_INOTIFY:
				agent_on_inotify(&a, now);
				break;
			case EV_SIGNAL: {
				struct signalfd_siginfo si;

				while (read(a.sigfd, &si, sizeof(si)) == sizeof(si)) {
					if (si.ssi_signo == SIGHUP) {
						reload(&a);
						continue;
					}
					if (!a.stopping)
						pr_info("%s: draining, flushing, shipping for up to %llu s",
							strsignal((int)si.ssi_signo),
							(unsigned long long)(SHUTDOWN_SEND_NS / 1000000000u));
					a.stopping = 1;
					a.stop_deadline = now + SHUTDOWN_SEND_NS;
				}
				if (a.stopping)
					drain_stop(&a.drain);
				break;
			}
			case EV_SOCK:
				ship_event(&a.ship, evs[i].events, now);
				break;
			case EV_PROC:
				agent_mark_gone(&a, (struct proc *)src, "exited");
				break;
			}
		}
		free_dead(&a);
		/* Stopping: the drain thread made its last pass; everything it
		 * queued is spooled (or the deadline passed: what is left in
		 * memory is still in the rings for the next agent) and sent. */
		if (a.stopping && drain_done(&a.drain) &&
		    (now >= a.stop_deadline || (!bqueue_len(&a.q) && ship_idle(&a.ship))))
			break;
	}
	drain_free(&a.drain);
	a.drain_ready = 0;
	agent_on_queue(&a, clock_monotonic_ns());
	free_dead(&a);
	agent_maybe_save(&a, clock_monotonic_ns(), 1);
	agent_do_stats(&a, clock_monotonic_ns(), 0);
	pr_info("agent stopped: %" PRIu64 " processes seen, %" PRIu64 " spans spooled, %"
		PRIu64 " acknowledged, %" PRIu64 " batches (%" PRIu64 " bytes) left in the spool",
		a.procs_seen, a.spans_spooled, a.ship.spans_acked, spool_unacked(&a.spool),
		a.spool.bytes);
	ret = 0;
out:
	teardown(&a);
	return ret;
}
