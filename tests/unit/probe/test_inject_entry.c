// SPDX-License-Identifier: MIT
/*
 * Loading fay's runtime into a process held at its exec, before its
 * program's first instruction (inject_library_at_entry(): what inline
 * probes in a command's descendants need, issue #25):
 *
 *   - a shell held at its exec (stopped at its loader's first
 *     instruction, as the exec watch holds a descendant) gets the
 *     runtime loaded: while ready() runs it maps libfay-probe.so, its
 *     runtime's control socket answers, and its main() has not run (the
 *     file its command writes is not there); then it runs to its end
 *     with its exit status and its output as without fay;
 *   - 20 such processes in a row, each loaded and run right;
 *   - a process that is not at its exec (running, past its entry) is
 *     refused with -EINVAL, nothing changed, and it runs on;
 *   - a process that exits while held (killed meanwhile) gives -ESRCH;
 *   - fay killed (SIGKILL) while it runs a held process to its entry
 *     point leaves that process running to its end, 10 times over;
 *   - a program with no room after its code (tests/bin/noroom): the
 *     trampoline in a page mapped for it, there while it is held at its
 *     entry, unmapped (by the process) and AT_ENTRY its own by main();
 *     the injector killed at 10 moments: it runs to its end.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "common/inline_wire.h"
#include "probe/inject.h"

static char lib[PATH_MAX + 32], dir[256];

/* A child running argv, held at its exec (SIGSTOP before its loader's
 * first instruction): PTRACE_TRACEME's exec stop, then detached with
 * SIGSTOP. */
static pid_t held_argv(char *const argv[])
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st))
		return -1;
	ptrace(PTRACE_DETACH, pid, 0, (void *)(long)SIGSTOP);
	/* its SIGSTOP taken: stopped (its state T) */
	for (int i = 0; i < 2000; i++) {
		char fn[64], buf[512], *p;
		int fd;
		ssize_t n;

		snprintf(fn, sizeof(fn), "/proc/%d/stat", (int)pid);
		fd = open(fn, O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		buf[n > 0 ? n : 0] = '\0';
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'T')
			return pid;
		usleep(1000);
	}
	return -1;
}

/* A child running sh -c CMD, held at its exec. */
static pid_t held_sh(const char *cmd)
{
	char *argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };

	return held_argv(argv);
}

/* The runtime's socket of a process gone (nothing of ours left). */
static void unlink_sock(pid_t pid)
{
	char p[108];

	inline_sock_path(pid, p, sizeof(p));
	unlink(p);
}

struct seen {
	pid_t pid;
	char done[512];
	bool mapped, answers, early;
	int anon;	/* executable mappings no file backs (but the vDSO) */
};

/* pid's executable mappings that no file backs, but the vDSO's. */
static int anon_exec(pid_t pid)
{
	char fn[64], line[4400], perms[8], path[4096];
	unsigned long ino;
	int n = 0;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "re");
	while (f && fgets(line, sizeof(line), f)) {
		path[0] = '\0';
		if (sscanf(line, "%*x-%*x %7s %*s %*s %lu %4095s", perms, &ino, path) >= 2)
			n += perms[2] == 'x' && !ino && strcmp(path, "[vdso]") &&
			     strcmp(path, "[vsyscall]");
	}
	if (f)
		fclose(f);
	return n;
}

static int hang(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return 0;
}

static int ready(void *arg)
{
	struct seen *s = arg;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char fn[64], line[4400];
	FILE *f;
	int fd;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)s->pid);
	f = fopen(fn, "re");
	while (f && fgets(line, sizeof(line), f))
		s->mapped |= strstr(line, "libfay-probe") != NULL;
	if (f)
		fclose(f);
	inline_sock_path(s->pid, a.sun_path, sizeof(a.sun_path));
	for (int i = 0; i < 500 && !s->answers; i++) {
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		s->answers = fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof(a));
		if (fd >= 0)
			close(fd);
		if (!s->answers)
			usleep(10000);
	}
	s->early = access(s->done, F_OK) == 0;
	s->anon = anon_exec(s->pid);
	return 0;
}

/* argv held at its exec, the injector (a child) SIGKILLed at moment i
 * of its run to the entry point (ready() never returns), the process
 * continued as the exec watch's guard would: its wait status. */
static int killed_after(char *const argv[], useconds_t us)
{
	char err[300];
	pid_t inj, p = held_argv(argv);
	int st = -1;

	inj = fork();
	if (inj == 0) {
		inject_library_at_entry(p, lib, hang, NULL, err, sizeof(err));
		_exit(0);
	}
	usleep(us);
	kill(inj, SIGKILL);
	waitpid(inj, NULL, 0);
	kill(p, SIGCONT);	/* the exec watch's guard's job */
	waitpid(p, &st, 0);
	unlink_sock(p);
	return st;
}

/* Moment i of 10: even ones i * 3 ms, odd ones 300 ms (held in ready()). */
static int killed_at(char *const argv[], int i)
{
	return killed_after(argv, i % 2 ? 300000 : (useconds_t)(i * 3000));
}

/* The file at path into buf (a string): its length, or -1. */
static ssize_t slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* A child that spins until killed (load, which widens the injector's
 * windows: it is preempted inside them). */
static pid_t spinner(void)
{
	pid_t p = fork();

	if (p == 0)
		for (;;)
			__asm__ volatile("" ::: "memory");
	return p;
}

/* The end of path's executable segment in its file, modulo the page:
 * 0 when its last page has no padding (no room for the trampoline). */
static long text_end_in_page(const char *path)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	long r = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || pread(fd, &eh, sizeof(eh), 0) != sizeof(eh)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	for (int i = 0; i < eh.e_phnum; i++)
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) ==
		    sizeof(ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
			r = (long)((ph.p_offset + ph.p_filesz) % 4096);
	close(fd);
	return r;
}

/* The fallback page: a program with no room after its code (noroom, its
 * executable segment padded to its last page's end) held at its exec
 * and loaded at its entry: the trampoline is in a page fay maps for it,
 * there while ready() runs, gone (unmapped by the process on its way to
 * the entry) by its main(), whose AT_ENTRY is its own; then the
 * injector killed at 10 moments: it always runs to its end. */
static void no_room(const char *noroom)
{
	struct seen s = { 0 };
	char out[400], err[300] = "", buf[128] = "";
	char *argv[] = { (char *)noroom, out, NULL };
	int rc, st = -1, good = 0, left = 0;
	ssize_t n;

	is_int((int)text_end_in_page(noroom), 0, "noroom's executable segment ends at its "
	       "page's end: no padding for the trampoline");
	snprintf(out, sizeof(out), "%s/noroom.out", dir);
	snprintf(s.done, sizeof(s.done), "%s", out);
	unlink(out);
	s.pid = held_argv(argv);
	s.anon = -1;
	rc = inject_library_at_entry(s.pid, lib, ready, &s, err, sizeof(err));
	kill(s.pid, SIGCONT);
	waitpid(s.pid, &st, 0);
	unlink_sock(s.pid);
	slurp(out, buf, sizeof(buf));
	is_int(rc, 0, "no room: loaded at its entry point: %s", rc ? err : "0");
	ok(s.mapped && s.answers && !s.early, "no room: mapped and answering before main()");
	is_int(s.anon, 1, "no room: the trampoline's page is there while it is held at its "
	       "entry (one executable mapping no file backs)");
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 3, "no room: it ran to its end (%#x)", st);
	is_str(buf, "anon 0\nentry own\n", "no room: by main() the page is gone and "
	       "AT_ENTRY is its own");
	for (int i = 0; i < 10; i++) {
		unlink(out);
		st = killed_at(argv, i);
		n = slurp(out, buf, sizeof(buf));
		if (WIFEXITED(st) && WEXITSTATUS(st) == 3 && n > 0)
			good++;
		else
			diag("no room, killed at moment %d: status %#x, %s", i, st, buf);
		left += strncmp(buf, "anon 0", 6) != 0;
	}
	is_int(good, 10, "no room: the injector killed at 10 moments: it always runs to its end");
	diag("no room: the page left behind in %d of 10 kills (killed before it was written)",
	     left);

	/* the first 2 ms (the page's mmap() made in the process) every
	 * 50 us, both CPUs loaded: a fay killed while the process stood on
	 * the vDSO's syscall instruction left it to run the vDSO's next
	 * bytes with the mmap()'s registers (SIGSEGV in 106 of 400 such
	 * kills before the call went through a "syscall; ret" of the
	 * loader with the entry pushed) */
	pid_t spin[2] = { spinner(), spinner() };

	good = 0;
	for (int i = 0; i < 40; i++) {
		unlink(out);
		st = killed_after(argv, (useconds_t)(i * 50));
		n = slurp(out, buf, sizeof(buf));
		if (WIFEXITED(st) && WEXITSTATUS(st) == 3 && n > 0)
			good++;
		else
			diag("no room, killed after %d us (loaded): status %#x, %s", i * 50, st, buf);
	}
	for (int i = 0; i < 2; i++) {
		kill(spin[i], SIGKILL);
		waitpid(spin[i], NULL, 0);
	}
	is_int(good, 40, "no room: killed in its first 2 ms, 40 times, the CPUs loaded: it "
	       "always runs to its end");
}

/* One held shell loaded at its entry: every check true. */
static bool one(int i, bool quiet)
{
	struct seen s = { 0 };
	char cmd[700], err[300] = "", out[64] = "";
	int rc, st = -1;
	FILE *f;

	snprintf(s.done, sizeof(s.done), "%s/done.%d", dir, i);
	unlink(s.done);
	snprintf(cmd, sizeof(cmd), "echo $((6 * 7)) > %s; exit 3", s.done);
	s.pid = held_sh(cmd);
	if (s.pid < 0) {
		ok(0, "a held shell");
		return false;
	}
	rc = inject_library_at_entry(s.pid, lib, ready, &s, err, sizeof(err));
	kill(s.pid, SIGCONT);	/* the exec watch continues what it held */
	waitpid(s.pid, &st, 0);
	unlink_sock(s.pid);
	f = fopen(s.done, "re");
	if (f) {
		if (!fgets(out, sizeof(out), f))
			out[0] = '\0';
		fclose(f);
	}
	if (quiet)
		return !rc && s.mapped && s.answers && !s.early && WIFEXITED(st) &&
		       WEXITSTATUS(st) == 3 && !strcmp(out, "42\n");
	is_int(rc, 0, "loaded at its entry point: %s", rc ? err : "0");
	ok(s.mapped, "the runtime is mapped when ready() runs");
	ok(s.answers, "its control socket answers while it is held at its entry");
	ok(!s.early, "main() had not run when ready() ran");
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 3, "it ran to its end: exit status 3 (%#x)", st);
	is_str(out, "42\n", "its output is its own");
	return true;
}

int main(void)
{
	char self[PATH_MAX], err[300], noroom[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int good = 0, st, rc;
	pid_t pid;

	if (n <= 0)
		return 1;
	self[n] = '\0';
	/* B/tests/unit/probe/test_inject_entry -> B/libfay-probe.so, or the
	 * normal build's beside a sanitized one (B = build/san) */
	*strstr(self, "/tests/unit/") = '\0';
	snprintf(lib, sizeof(lib), "%s/libfay-probe.so", self);
	snprintf(dir, sizeof(dir), "/tmp/fay-test-inject-entry.%d", (int)getpid());
	mkdir(dir, 0755);
	if (geteuid() != 0 || access(lib, R_OK)) {
		skip_all("needs root and %s", lib);
	}
	one(0, false);
	for (int i = 1; i <= 20; i++)
		good += one(i, true);
	is_int(good, 20, "20 held shells in a row: each loaded, held until ready, right");

	/* not at its exec: a running process */
	pid = fork();
	if (pid == 0) {
		execl("/bin/sleep", "sleep", "0.3", (char *)NULL);
		_exit(127);
	}
	usleep(100000);
	rc = inject_library_at_entry(pid, lib, NULL, NULL, err, sizeof(err));
	is_int(rc, -EINVAL, "a running process, past its entry: -EINVAL (%s)", err);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "and it runs to its end");

	/* it dies while held */
	pid = held_sh("exit 0");
	kill(pid, SIGKILL);
	usleep(50000);
	rc = inject_library_at_entry(pid, lib, NULL, NULL, err, sizeof(err));
	ok(rc < 0, "a process killed while held: refused (%d: %s)", rc, err);
	waitpid(pid, &st, 0);

	/* the injector killed while it runs the process to its entry */
	good = 0;
	for (int i = 0; i < 10; i++) {
		char cmd[700], done[512];
		char *argv[] = { "/bin/sh", "-c", cmd, NULL };

		snprintf(done, sizeof(done), "%s/k.%d", dir, i);
		snprintf(cmd, sizeof(cmd), "echo x > %s", done);
		st = killed_at(argv, i);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && access(done, F_OK) == 0)
			good++;
		else
			diag("killed at moment %d: status %#x, %s", i, st,
			     access(done, F_OK) ? "no output" : "its output");
	}
	is_int(good, 10, "the injector killed at 10 moments: the process always runs to its end");

	/* B/tests/bin/noroom, or the normal build's beside a sanitized one */
	snprintf(noroom, sizeof(noroom), "%s/tests/bin/noroom", self);
	if (access(noroom, X_OK))
		snprintf(noroom, sizeof(noroom), "%s/../tests/bin/noroom", self);
	if (!access(noroom, X_OK))
		no_room(noroom);
	else
		ok(0, "tests/bin/noroom is not built (make)");
	snprintf(err, sizeof(err), "rm -rf %s", dir);
	if (system(err))
		diag("%s failed", err);
	return test_done();
}
