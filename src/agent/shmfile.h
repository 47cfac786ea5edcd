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

/* Limits beyond which a header is considered corrupt rather than big. */
#define SHM_MAX_RINGS      4096u
#define SHM_MAX_RING_SLOTS (1u << 24)
#define SHM_MAX_POOL       (1u << 20)
#define SHM_MAX_POOL_STRIDE (1u << 20)
#define SHM_MAX_FILE_SIZE  (UINT64_C(64) << 30)

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

#endif
