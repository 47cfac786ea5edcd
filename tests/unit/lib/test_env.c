// SPDX-License-Identifier: MIT
/*
 * libfay's environment overrides (FAY_DISABLE, FAY_SAMPLE, FAY_SERVICE,
 * FAY_SHM_DIR, FAY_RINGS, FAY_RING_KB, FAY_POOL), each read by a fresh
 * process: this program runs itself again with one case's environment
 * (the case's checks run in that process, which exits with the number of
 * checks that failed, and says which on stdout as TAP comments).
 */
#include <signal.h>
#include <sys/wait.h>

#include <fay/trace.h>

#include "libtest.h"

static int fails;

#define check(cond, ...) do {						\
	if (!(cond)) {							\
		printf("#   failed: ");					\
		printf(__VA_ARGS__);					\
		printf(" (line %d)\n", __LINE__);			\
		fails++;						\
	}								\
} while (0)

static unsigned tp_flags(struct fay_span *s)
{
	char tp[FAY_TRACEPARENT_LEN];

	if (fay_span_traceparent(s, tp, sizeof(tp)) != 55)
		return 0xff;
	return (unsigned)strtoul(tp + 53, NULL, 16);
}

/* Map this process's file; 0 if there is exactly one. */
static int own_file(struct lt_view *v)
{
	char path[PATH_MAX];

	if (lt_find(getpid(), path, sizeof(path)) != 1)
		return -1;
	return lt_map(path, v);
}

static int run_case(const char *name)
{
	struct lt_view v = { 0 };
	struct fay_span *s;
	int ret = fay_init("svc", "127.0.0.1", 80);

	if (!strcmp(name, "disable")) {
		check(ret == 0, "fay_init returns 0 (%d)", ret);
		check(lt_count(FAY_SHM_PREFIX, NULL, 0) == 0, "no file");
		s = fay_span_root("x");
		check(s && tp_flags(s) == 1, "span propagates, sampled decision kept");
		fay_span_end(s);
		check(lt_count(FAY_SHM_PREFIX, NULL, 0) == 0, "still no file");
	} else if (!strcmp(name, "sample0")) {
		check(ret == 0 && !own_file(&v), "file created");
		fay_set_sampling(1);
		s = fay_span_root("x");
		check(tp_flags(s) == 0, "FAY_SAMPLE=0 wins over fay_set_sampling(1)");
		fay_span_end(s);
		check(v.hdr && v.hdr->sample_one_in == 0, "sample_one_in 0");
		check(v.hdr && lt_records(&v) == 0, "nothing recorded");
	} else if (!strcmp(name, "sample3")) {
		check(ret == 0 && !own_file(&v), "file created");
		check(v.hdr && v.hdr->sample_one_in == 3, "sample_one_in 3");
	} else if (!strcmp(name, "rate")) {
		check(ret == 0 && !own_file(&v), "file created");
		fay_set_sampling(1);
		for (int i = 0; i < 5000; i++)
			fay_span_end(fay_span_root("r"));
		check(v.hdr && lt_records(&v) >= 1 && lt_records(&v) <= 20,
		      "rate:100 lets a burst of about 10 through, not 5000 (%llu)",
		      v.hdr ? (unsigned long long)lt_records(&v) : 0ull);
	} else if (!strcmp(name, "service")) {
		check(ret == 0 && !own_file(&v), "file created");
		check(v.hdr && !strcmp(v.hdr->service, "override"), "FAY_SERVICE wins (%s)",
		      v.hdr ? v.hdr->service : "-");
		check(v.hdr && !strcmp(v.hdr->ip, "127.0.0.1") && v.hdr->port == 80,
		      "ip and port from fay_init");
	} else if (!strcmp(name, "dir")) {
		check(ret == 0, "fay_init (%d)", ret);
		check(lt_count(FAY_SHM_PREFIX, NULL, 0) == 1, "file in the new FAY_SHM_DIR");
	} else if (!strcmp(name, "geometry")) {
		check(ret == 0 && !own_file(&v), "file created");
		check(v.hdr && v.hdr->nrings == 2 && v.hdr->ring_slots == 64 &&
		      v.hdr->npool == 8, "FAY_RINGS=2 FAY_RING_KB=4 FAY_POOL=8");
		check(v.hdr && v.hdr->file_size == v.size, "file_size matches");
		/* the largest span record fits the smallest ring */
		s = fay_span_root("big");
		for (int i = 0; i < 40; i++)
			fay_span_tag(s, "k", "0123456789012345678901234567890");
		fay_span_end(s);
		check(v.hdr && lt_records(&v) == 1 && v.hdr->lost_too_big == 0,
		      "a full span fits a 4 KiB ring");
	} else if (!strcmp(name, "exit")) {
		/* exit() normally: the parent then checks the file is CLOSED
		 * and still there */
		check(ret == 0 && !own_file(&v), "file created");
		check(v.hdr && v.hdr->state == FAY_SHM_LIVE, "LIVE while running");
		fay_span_end(fay_span_root("last"));
		lt_unmap(&v);
		exit(fails);
	} else if (!strcmp(name, "killed")) {
		/* killed with 3 spans open: the agent must be able to see them */
		check(ret == 0, "fay_init");
		fay_span_root("open 1");
		fay_span_child(fay_span_root("open 2"), "open 3");
		fay_span_end(fay_span_root("ended"));
		fflush(stdout);
		raise(SIGKILL);
	} else if (!strncmp(name, "bad", 3)) {
		check(ret == -EINVAL, "fay_init refuses it: %d", ret);
		check(lt_count(FAY_SHM_PREFIX, NULL, 0) == 0, "no file");
	} else {
		check(0, "unknown case %s", name);
	}
	lt_unmap(&v);
	return fails;
}

/* After the "killed" case: the file is there, LIVE (nobody closed it),
 * with exactly 3 handles OPEN in its pool and the ended span in a ring. */
static int killed_ok(const char *dir, int st)
{
	char path[PATH_MAX * 2];
	struct lt_view v = { 0 };
	unsigned open = 0;
	int good;

	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
		return 0;
	if (lt_count_in(dir, FAY_SHM_PREFIX, path, sizeof(path)) != 1 || lt_map(path, &v))
		return 0;
	for (uint32_t i = 0; i < v.hdr->npool; i++) {
		const struct fay_pool_slot *ps = (const struct fay_pool_slot *)
			(v.base + v.hdr->pool_off + (size_t)i * v.hdr->pool_stride);

		if (ps->state == FAY_POOL_OPEN)
			open++;
	}
	good = v.hdr->state == FAY_SHM_LIVE && open == 3 && lt_records(&v) == 1;
	if (!good)
		diag("killed: state %u, %u open, %llu records", v.hdr->state, open,
		     (unsigned long long)lt_records(&v));
	lt_unmap(&v);
	return good;
}

struct env_case {
	const char *name, *what;
	const char *env[4];     /* "NAME=value" */
};

static const struct env_case cases[] = {
	{ "disable", "FAY_DISABLE=1: no file, context propagates", { "FAY_DISABLE=1" } },
	{ "sample0", "FAY_SAMPLE=0 records nothing, overrides the setter", { "FAY_SAMPLE=0" } },
	{ "sample3", "FAY_SAMPLE=3 published", { "FAY_SAMPLE=3" } },
	{ "rate", "FAY_SAMPLE=rate:100 overrides the setter", { "FAY_SAMPLE=rate:100" } },
	{ "service", "FAY_SERVICE overrides the service", { "FAY_SERVICE=override" } },
	{ "dir", "FAY_SHM_DIR is created", { NULL } },
	{ "geometry", "FAY_RINGS/FAY_RING_KB/FAY_POOL shape the file",
	  { "FAY_RINGS=2", "FAY_RING_KB=4", "FAY_POOL=8" } },
	{ "exit", "exit: the file stays, state CLOSED, the span kept", { NULL } },
	{ "killed", "SIGKILL: the file stays LIVE, 3 open handles show in the pool", { NULL } },
	{ "bad-rings0", "FAY_RINGS=0 refused", { "FAY_RINGS=0" } },
	{ "bad-rings", "FAY_RINGS=abc refused", { "FAY_RINGS=abc" } },
	{ "bad-ringkb", "FAY_RING_KB=48 (not a power of two) refused", { "FAY_RING_KB=48" } },
	{ "bad-ringkb2", "FAY_RING_KB=2 (too small) refused", { "FAY_RING_KB=2" } },
	{ "bad-pool", "FAY_POOL=-1 refused", { "FAY_POOL=-1" } },
	{ "bad-sample", "FAY_SAMPLE=1.5 refused", { "FAY_SAMPLE=1.5" } },
	{ "bad-rate", "FAY_SAMPLE=rate:x refused", { "FAY_SAMPLE=rate:x" } },
	{ "bad-rate2", "FAY_SAMPLE=rate:-3 refused", { "FAY_SAMPLE=rate:-3" } },
};

int main(int argc, char **argv)
{
	static const char *vars[] = {
		"FAY_DISABLE", "FAY_SAMPLE", "FAY_SERVICE", "FAY_RINGS",
		"FAY_RING_KB", "FAY_POOL",
	};

	if (argc == 3 && !strcmp(argv[1], "--case")) {
		snprintf(lt_dir, sizeof(lt_dir), "%s", getenv("FAY_SHM_DIR"));
		return run_case(argv[2]);
	}

	lt_setup();
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct env_case *c = &cases[i];
		char dir[PATH_MAX + 16];
		int st = -1;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			for (size_t k = 0; k < ARRAY_SIZE(vars); k++)
				unsetenv(vars[k]);
			/* each case its own directory, inside the test's */
			snprintf(dir, sizeof(dir), "%s/%s", lt_dir, c->name);
			if (strcmp(c->name, "dir") && mkdir(dir, 0700))
				_exit(100);
			setenv("FAY_SHM_DIR", dir, 1);
			for (size_t k = 0; k < ARRAY_SIZE(c->env) && c->env[k]; k++)
				putenv((char *)c->env[k]);
			execl("/proc/self/exe", argv[0], "--case", c->name, (char *)NULL);
			_exit(101);
		}
		waitpid(pid, &st, 0);
		snprintf(dir, sizeof(dir), "%s/%s", lt_dir, c->name);
		if (!strcmp(c->name, "exit") && WIFEXITED(st) && !WEXITSTATUS(st)) {
			char path[PATH_MAX * 2];
			struct lt_view v;

			/* the case ran in pid (execl keeps it) */
			st = lt_count_in(dir, FAY_SHM_PREFIX, path, sizeof(path)) == 1 &&
			     !lt_map(path, &v) ? 0 : 1 << 8;
			if (!st) {
				if (v.hdr->state != FAY_SHM_CLOSED || v.hdr->pid != (uint32_t)pid ||
				    lt_records(&v) != 1)
					st = 1 << 8;
				lt_unmap(&v);
			}
		}
		if (!strcmp(c->name, "killed"))
			st = killed_ok(dir, st) ? 0 : 1 << 8;
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", c->what);
		/* the case directories go before lt_cleanup removes lt_dir */
		lt_rmdir(dir);
	}
	return test_done();
}
