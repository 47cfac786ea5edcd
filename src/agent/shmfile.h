/* SPDX-License-Identifier: MIT */
/*
 * Validating and inspecting a traced process's shm file (shmfile.c): the
 * header against the file (include/fay/ring.h is the ABI), the file name,
 * the owner process.
 */
#ifndef FAY_AGENT_SHMFILE_H
#define FAY_AGENT_SHMFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <fay/ring.h>

/* Limits beyond which a header is refused rather than read: what libfay
 * can make (64 MiB rings, FAY_RING_KB), and a file the agent may be made
 * to read (and a tmpfs to allocate, by read faults) whole. */
#define SHM_MAX_RINGS      4096u
#define SHM_MAX_RING_SLOTS (1u << 20)
#define SHM_MAX_POOL       (1u << 20)
#define SHM_MAX_POOL_STRIDE (1u << 16)
#define SHM_MAX_FILE_SIZE  (UINT64_C(4) << 30)

/*
 * Check everything in the header h of a file of st_size bytes named name
 * (the base name, "fay-<pid>-<instance hex>.shm"; NULL skips the name
 * check).  Returns 0 when the file can be consumed, -EAGAIN when it is not
 * ready yet (state INIT, or still too small to hold a header), or -EBADMSG
 * with the offending field and its value in err.
 */
int shm_hdr_validate(const struct fay_shm_hdr *h, uint64_t st_size,
		     const char *name, char *err, size_t errlen);

/* Parse "fay-<pid>-<hex>.shm".  Returns 0 or -EINVAL. */
int shm_name_parse(const char *name, uint32_t *pid, uint64_t *instance);

/* Number of span handles in the pool of a validated file still marked
 * FAY_POOL_OPEN (spans begun but never ended). */
uint32_t shm_pool_open_count(const void *base, const struct fay_shm_hdr *h);

/*
 * Is process pid the owner of the file (dev, ino)?  Reads
 * /proc/<pid>/maps: 1 when a mapping of that inode is there, 0 when the
 * process does not map it (gone, pid reused, or it unmapped the file),
 * -errno when the maps cannot be read (then the caller decides).
 */
int shm_pid_maps_file(uint32_t pid, dev_t dev, ino_t ino);

/*
 * The process that owns the file (dev, ino) whose name says pid vpid: a
 * pid of the agent's namespace.  vpid itself when it maps that inode (a
 * process of the agent's pid namespace), else the process whose own,
 * innermost pid namespace numbers it vpid (/proc/PID/status NSpid) and
 * maps it: a container's process, its file in the container's /dev/shm
 * or in a directory it shares with the host.  vpid when its maps cannot
 * be read (trusted, as shm_pid_maps_file() says); 0 when no process owns
 * the file (gone).  Walks /proc: for a file's discovery, not per span.
 */
uint32_t shm_owner_pid(uint32_t vpid, dev_t dev, ino_t ino);

/*
 * A traced process can shrink its file under the agent's mapping; a read
 * of a page past the new end raises SIGBUS.  shm_guard_install() sets a
 * SIGBUS handler for the process (call once, before any mapping is read);
 * shm_guarded() runs fn(arg) so that such a SIGBUS in the calling thread
 * abandons fn and returns -EFAULT instead of killing the agent.  Any other
 * SIGBUS (no guard in that thread) still kills the process, as it would
 * without the handler.  fn may stop at any read of a mapping: it must not
 * hold a lock then, and must keep what it allocated reachable.
 * Returns fn's value, or -EFAULT.
 */
int shm_guard_install(void);
int shm_guarded(int (*fn)(void *arg), void *arg);

/*
 * Is the file's owner (uid) allowed for process pid?  Yes when uid is the
 * agent's effective uid or root, or the owner of the running process pid;
 * a file naming a process that is not running is accepted (its records
 * are drained and it is removed).  Returns 1, or 0 with the reason in err.
 */
int shm_owner_ok(uint32_t pid, uid_t uid, char *err, size_t errlen);

#endif
