/* SPDX-License-Identifier: MIT */
/*
 * fay agent: the pieces it is built from, one header each, split so the
 * unit tests (tests/unit/agent/) can drive each one on its own.
 *
 *   shmfile.c/h  validating and inspecting a process's shm file (ring.h ABI)
 *   batch.c/h  encoding drained span records into a wire BATCH frame
 *   bqueue.c/h the bounded queue of sealed batches between the two threads
 *   drain.c/h  the drain thread: rings -> batches, nothing else; drain.c
 *              makes a pass, drain_thread.c runs the thread (drain_int.h:
 *              what they share)
 *   spool.c/h  the on-disk spool of unacknowledged batches and the cursor
 *              file (the durability protocol, see below and docs/ABI.md);
 *              spool_load.c reads it back at start, spool_cursor.c holds
 *              the cursor table and file (spool_int.h: what they share)
 *   ship.c/h   the connection to the collector (HELLO, BATCH window, ACK)
 *   agent.c/h  the main thread's epoll loop: discovery, spool writes,
 *              shipping, stats, signals; agent.c sets it up and runs it,
 *              agent_files.c finds and follows the shm files,
 *              agent_spool.c spools batches and makes the stats
 *              (agent_int.h: what the three share)
 *   metrics_http.c  --metrics: Prometheus text from STATE-DIR/stats.json
 * (option parsing and --help are in src/cli/cmd_agent.c)
 *
 * Two threads.  The drain thread only reads rings into sealed in-memory
 * batches (bqueue.c, bounded): it never waits for the disk, /proc or the
 * network.  The main thread writes those batches to the spool, persists
 * the cursors, ships, and does everything else (the I/O that may stall).
 *
 * Durability protocol.  Every batch is written to the spool (the complete
 * wire frame, followed by a trailer holding the ring cursors at the end of
 * the batch; written to a temporary name and renamed) before anything
 * depends on it.  The cursor file is rewritten only now and then (about
 * once a second, and always before a spool file whose trailer it must
 * supersede is deleted: ACKed, WELCOME-covered or evicted), because every
 * spool file newer than it carries its own cursors.  After a crash the
 * cursors are the cursor file's, moved forward by the trailer of every
 * spooled batch newer than it, so each ring resumes exactly after the last
 * record that reached the spool: nothing is spooled twice.  Records that
 * were drained into memory but not yet spooled when the agent died are
 * read again from the ring if they are still there; if the producer has
 * overwritten them meanwhile the consumer finds a gap in the record
 * numbers and counts them lost (ring_overwrite): never delivered twice,
 * never lost silently.  A batch file is deleted only once the cursor file
 * covers it, and only on the collector's ACK (or when WELCOME says it was
 * committed), or evicted (oldest first, counted) when the spool is full.
 */
#ifndef FAY_AGENT_AGENT_H
#define FAY_AGENT_AGENT_H

#include <stdint.h>

struct tls_conf;

struct agent_opts {
	const char *collector;  /* host:port */
	const char *shm_dir;
	const char *state_dir;
	uint64_t spool_max;
	uint64_t flush_ns;
	uint64_t stats_ns;
	const char *host;
	const char *token;
	struct tls_conf *tls;   /* --tls-ca: TLS to the collector (NULL: none) */
	/* What SIGHUP reads again (NULL: not given): --token-file, and the
	 * files of tls (--tls-ca, --tls-cert, --tls-key). */
	const char *token_file, *tls_ca, *tls_cert, *tls_key;
	uint64_t queue_max;     /* bytes of drained batches waiting for the spool */
	int drain_nice;         /* nice value of the drain thread (0: unchanged) */
	int fsync;
	int shm_any_owner;      /* accept shm files whatever their owner */
	int no_containers;      /* do not look into containers' /dev/shm */
	/* look only into those of processes in this cgroup (v2 path, its
	 * subtree: "/machine.slice"); NULL: every process's */
	const char *containers_in;
	/* cluster queries probe every user's processes even when the agent
	 * runs as a non-root user (--allow-other-users; engine.h) */
	int allow_other_users;
	/* cluster queries on a process without fay's runtime: load this
	 * library (libfay-probe.so) with ptrace when allowed (engine.h
	 * engine_opts.inject_lib; NULL: never); no_inject: never (--no-inject) */
	const char *inject_lib;
	int no_inject;
	/* --flight: bytes of the flight buffer, where the spans head sampling
	 * did not choose (libfay FAY_RECORD=all) are kept for captures
	 * (flight.h); 0: none, they are dropped and counted */
	uint64_t flight_bytes;
	/* cluster queries see only tasks in this cgroup v2 and below it
	 * (--cgroup; engine_opts.cgroup); NULL: every task */
	const char *cgroup;
};

/* Run the agent until SIGTERM/SIGINT; SIGHUP reads the token file and
 * the TLS files again for the next connections (a file that cannot be
 * used is refused, logged, and the old one kept).  Returns 0 or -errno
 * (startup). */
int agent_run(const struct agent_opts *o);

#endif
