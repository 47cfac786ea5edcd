// SPDX-License-Identifier: MIT
/*
 * Sites of shared objects loaded later (INL_LATER, issue 19 item 3): a
 * function of a library the program dlopen()s after fay attached (a
 * python extension module's libbz2, a plugin) is armed when the library
 * is mapped, before any of its code runs, and forgotten when dlclose()
 * unmaps it; a later dlopen arms it again.
 *
 * How the runtime sees each load: it patches the loader's debugger hook,
 * r_brk of _r_debug (glibc's _dl_debug_state(), an empty function), with
 * its own inline probe.  The loader calls it with r_state RT_CONSISTENT
 * once a dlopen() has mapped the new objects, before it relocates them
 * and runs their constructors, and once a dlclose() has unmapped them;
 * in the thread that loads, with the loader's lock held (no other load
 * meanwhile).  The alternatives do less: polling dl_iterate_phdr() sees
 * a load after the fact (calls made meanwhile are missed: 16 of 40 of
 * python's bz2 calls with fay following the process from outside);
 * LD_AUDIT's la_objopen() needs the environment at exec (not -p PID) and
 * runs in its own namespace; an interposed dlopen() returns after the
 * constructors ran and is not seen by a process fay attaches to later
 * (its calls are bound already).  The hook is the loader's published
 * interface for exactly this (gdb breaks there), works in a process the
 * runtime was injected into, costs nothing between loads, and needs no
 * trap: the patch is a jump like any site's.
 *
 * An object is matched by its file (st_dev, st_ino of the name the loader
 * opened: a symlinked soname is the same file), the function's address
 * computed from its file offset and the executable PT_LOAD segment of
 * the object that holds it.  Every live write of the runtime is made
 * under one lock (rt_patch_lock()): the patcher's write protocol is one
 * at a time.  A hook call made while the calling thread holds it (a load
 * caused by the runtime's own arming) does nothing.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "rt/rt.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread bool locked_here;
static struct rt_session *watched;	/* under lock */
static struct patch_site *hook;		/* on r_brk, armed while watched */
static bool hook_armed;			/* (a failed disarm leaves it armed) */
/* The loader's debugger hook, _dl_debug_state() (r_brk of _r_debug). */
static void *loader_brk(void)
{
	void *f = dlvsym(RTLD_DEFAULT, "_dl_debug_state", "GLIBC_PRIVATE");

	return f ? f : (void *)(uintptr_t)_r_debug.r_brk;
}

void rt_patch_lock(void)
{
	pthread_mutex_lock(&lock);
	locked_here = true;
}

void rt_patch_unlock(void)
{
	locked_here = false;
	pthread_mutex_unlock(&lock);
}

struct find {
	const struct inl_later *w;
	uint64_t addr;
	bool found, fits;
};

/* dl_iterate_phdr(): the object of file w, and where w's offset is. */
static int find_obj(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find *f = arg;
	uint64_t room = f->w->room > f->w->size ? f->w->room : f->w->size;
	struct stat st;

	(void)size;
	if (!info->dlpi_name || !info->dlpi_name[0] || stat(info->dlpi_name, &st) ||
	    (uint64_t)st.st_dev != f->w->dev || (uint64_t)st.st_ino != f->w->ino)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || f->w->off < ph->p_offset ||
		    f->w->off >= ph->p_offset + ph->p_filesz)
			continue;
		f->addr = info->dlpi_addr + ph->p_vaddr + (f->w->off - ph->p_offset);
		f->fits = f->w->off - ph->p_offset + room <= ph->p_memsz;
		f->found = true;
		return 1;
	}
	return 0;
}

static struct find locate(const struct inl_later *w)
{
	struct find f = { w, 0, false, false };

	dl_iterate_phdr(find_obj, &f);
	return f;
}

void rt_later_child(void)
{
	/* the thread that held the lock is not in the child */
	pthread_mutex_init(&lock, NULL);
	locked_here = false;
	watched = NULL;
}

int rt_later_add(struct rt_session *s, const struct inl_later *w, char *why, size_t len)
{
	uint64_t room = w->room > w->size ? w->room : w->size;
	struct rt_later *l;
	struct find f;

	if (s->nlater >= INLINE_MAX_SITES) {
		snprintf(why, len, "more than %d sites", INLINE_MAX_SITES);
		return -EINVAL;
	}
	if (!w->size || room > (1u << 24)) {
		snprintf(why, len, "a function of %llu bytes", (unsigned long long)w->size);
		return -EINVAL;
	}
	l = &s->later[s->nlater];
	memset(l, 0, sizeof(*l));
	l->w = *w;
	l->w.name[sizeof(l->w.name) - 1] = '\0';
	l->w.obj[sizeof(l->w.obj) - 1] = '\0';
	f = locate(&l->w);
	if (f.found && !f.fits) {
		snprintf(why, len, "0x%llx..+%llu is past the end of its segment in %s",
			 (unsigned long long)f.addr, (unsigned long long)room, l->w.obj);
		return -EINVAL;
	}
	if (f.found) {	/* loaded now: the patcher's verdict (it writes nothing) */
		struct patch_site *ps = patch_site_new_room((void *)(uintptr_t)f.addr,
							    w->size, room, why, len);

		int rc;

		if (!ps)
			return -EINVAL;
		snprintf(l->first, sizeof(l->first), "%s%s", patch_site_first(ps),
			 patch_site_nop(ps) ? " (a nop)" : "");
		rc = patch_site_hazard(ps, why, len);
		patch_site_free(ps);
		if (rc)
			return rc;
	}
	s->nlater++;
	return 0;
}

/* Under lock: arm l in its object at addr (flags: PATCH_ARM_UNREACHED
 * for an object just mapped). */
static void arm_one(struct rt_session *s, struct rt_later *l, uint64_t addr,
		    unsigned int flags)
{
	uint64_t room = l->w.room > l->w.size ? l->w.room : l->w.size;
	char why[160];
	struct patch_site *ps;

	ps = patch_site_new_room((void *)(uintptr_t)addr, l->w.size, room, why, sizeof(why));
	if (ps && patch_site_arm_flags(ps, rt_on_entry, s->exit ? rt_on_exit : NULL,
				       rt_site_arg(s, l->w.cookie),
				       PATCH_HANDLERS_KEEP_VECTORS | flags, why, sizeof(why))) {
		patch_site_free(ps);
		ps = NULL;
	}
	if (!ps) {
		s->refused++;
		snprintf(s->later_err, sizeof(s->later_err), "%.63s: %s", l->w.name, why);
		return;
	}
	rt_ustack_note(ps);
	l->ps = ps;
	l->addr = addr;
	s->loads++;
}

/*
 * Under lock: forget the sites whose object went away, arm those whose
 * object is loaded now.  From the hook (loader): only objects that
 * appeared since the last look, mapped and not yet reachable (no thread
 * to move out of their bytes: the control thread, which blocks the
 * signal that would, is not asked); from the control thread (watch):
 * every loaded one, threads moved as for any site.
 */
static void scan(struct rt_session *s, bool loader)
{
	for (int i = 0; i < s->nlater; i++) {
		struct rt_later *l = &s->later[i];
		struct find f = locate(&l->w);
		bool fresh = f.found && !l->present;

		l->present = f.found;
		if (l->ps && (!f.found || f.addr != l->addr)) {
			/* unmapped by a dlclose(): nothing to restore there */
			patch_site_forget(l->ps);
			patch_site_free(l->ps);
			l->ps = NULL;
			s->unloads++;
		}
		if (!l->ps && f.found && f.fits && (fresh || !loader))
			arm_one(s, l, f.addr, loader ? PATCH_ARM_UNREACHED : 0);
	}
}

/* The handler on r_brk: the loader's state changed. */
static void on_debug_state(struct patch_regs *regs, void *arg)
{
	(void)regs;
	(void)arg;
	if (locked_here)
		return;
	rt_patch_lock();
	if (watched)
		scan(watched, true);
	rt_patch_unlock();
}

int rt_later_watch(struct rt_session *s, char *why, size_t len)
{
	void *brk;
	int rc = 0;

	if (!s->nlater)
		return 0;
	brk = loader_brk();	/* (not under the lock: dlsym) */
	rt_patch_lock();
	if (!hook_armed) {
		/* _dl_debug_state(): "ret" and its padding (patched over it);
		 * a site is armed once: a new one each time */
		patch_site_free(hook);
		hook = brk ? patch_site_new_room(brk, 1, 16, why, len) : NULL;
		if (!hook) {
			if (!brk)
				snprintf(why, len, "the loader publishes no r_brk");
			rc = -EINVAL;
		}
		if (!rc)
			rc = patch_site_arm(hook, on_debug_state, NULL, NULL, why, len);
		hook_armed = !rc;
	}
	if (!rc) {
		watched = s;
		s->watching = true;
		scan(s, false);	/* the objects loaded now */
	}
	rt_patch_unlock();
	if (rc) {
		char inner[256];

		snprintf(inner, sizeof(inner), "%s", why);
		snprintf(why, len, "cannot watch the loader (r_brk): %s", inner);
	} else if (s->refused) {
		/* a site of an object loaded now not armed: as SITES would */
		snprintf(why, len, "%s", s->later_err);
		rt_later_end(s);
		rc = -EINVAL;
	}
	return rc;
}

size_t rt_later_describe(const struct rt_session *s, char *buf, size_t len)
{
	size_t off = 0;

	for (int i = 0; i < s->nlater && off < len; i++) {
		const struct rt_later *l = &s->later[i];

		if (l->first[0])
			off += (size_t)snprintf(buf + off, len - off, "%s: %s\n", l->w.name,
						l->first);
		else
			off += (size_t)snprintf(buf + off, len - off, "%s: armed when %s is "
						"loaded (dlopen)\n", l->w.name, l->w.obj);
	}
	return off < len ? off : len - 1;
}

void rt_later_end(struct rt_session *s)
{
	if (!s->watching)
		return;
	rt_patch_lock();
	watched = NULL;
	s->watching = false;
	/* a failure leaves it armed, doing nothing until the next session */
	if (hook_armed && !patch_site_disarm(hook))
		hook_armed = false;
	for (int i = 0; i < s->nlater; i++) {
		struct rt_later *l = &s->later[i];
		struct find f;

		if (!l->ps)
			continue;
		f = locate(&l->w);
		if (!f.found || f.addr != l->addr || !patch_site_ours(l->ps))
			patch_site_forget(l->ps);
		patch_site_free(l->ps);
		l->ps = NULL;
	}
	rt_patch_unlock();
}
