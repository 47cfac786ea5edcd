// SPDX-License-Identifier: MIT
/*
 * The patcher (patch.h has the contract): site analysis and the public
 * calls.  The trampolines are tramp.c's, the live writes live.c's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patch/patch_int.h"

#define MAX_SCAN	65536	/* bytes of a function decoded for branches */

int patch_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}
static bool is_nop(const struct dinsn *d)
{
	int i = 0;

	/* operand-size and segment prefixes of the long nops (66 2e 0f 1f) */
	while (i < d->size && (d->bytes[i] == 0x66 || d->bytes[i] == 0x2e))
		i++;
	return (i == 0 && d->bytes[0] == 0x90) ||
	       (d->size >= i + 3 && d->bytes[i] == 0x0f && d->bytes[i + 1] == 0x1f);
}

static bool is_plain_ret(const struct dinsn *d)
{
	return (d->size == 1 && d->bytes[0] == 0xc3) ||
	       (d->size == 2 && d->bytes[0] == 0xf3 && d->bytes[1] == 0xc3);
}

/* Why d cannot be moved into a trampoline (last: it is the last of the
 * patched instructions), or NULL. */
static const char *unmovable(const struct dinsn *d, bool last)
{
	/* int3, int1, int N: a function's code has none of these at its
	 * start; there they are another tracer's breakpoint (a uprobe, a
	 * debugger's), put over the first byte of the real instruction,
	 * which is then not in memory to move, and which the other tracer
	 * writes back over our jump when it leaves */
	if (d->bytes[0] == 0xcc || d->bytes[0] == 0xf1 || d->bytes[0] == 0xcd)
		return "is a breakpoint another tracer put there (a uprobe or a debugger): "
		       "the function's own first instruction is not in memory";
	if (d->rel && d->kind == DK_OTHER)
		return "has a relative operand that cannot be moved";
	if (d->call && !last)
		return "is a call before the end of the patched bytes: its callee would "
		       "return into the trampoline";
	if (d->call && d->mem_sp)
		return "is a call through a stack operand";
	if (d->call && !d->rel && (!d->modrm_off || d->bytes[d->modrm_off - 1] != 0xff ||
				   ((d->bytes[d->modrm_off] >> 3) & 7) != 2))
		return "is a far call";
	return NULL;
}

/* Whether a patched instruction starts at address a. */
static bool head_at(const struct patch_site *s, uint64_t a)
{
	for (int i = 0; i < s->nhead; i++)
		if (s->head[i].addr == a)
			return true;
	return false;
}

struct patch_site *patch_site_new(void *func, size_t size, char *err, size_t errlen)
{
	return patch_site_new_room(func, size, size, err, errlen);
}

/* Whether the bytes func[from, JMP_LEN) are alignment padding: nops or
 * int3s after the function's last ret, inside room. */
static bool padding(const uint8_t *func, size_t from, size_t room)
{
	struct dinsn d[JMP_LEN];
	uint64_t bad;
	char err[64];
	size_t at = from;
	int n;

	if (room < JMP_LEN)
		return false;
	n = dec_range(func + from, room - from, (uint64_t)(uintptr_t)(func + from), d,
		      JMP_LEN, &bad, err, sizeof(err));
	for (int i = 0; i < n && at < JMP_LEN; i++) {
		if (!is_nop(&d[i]) && d[i].bytes[0] != 0xcc)
			return false;
		at += d[i].size;
	}
	return at >= JMP_LEN;
}

struct patch_site *patch_site_new_room(void *func, size_t size, size_t room, char *err,
				       size_t errlen)
{
	struct patch_site *s;
	struct dinsn *all;
	size_t scan = size < MAX_SCAN ? size : MAX_SCAN;
	uint64_t bad, f = (uint64_t)(uintptr_t)func;
	const char *why;
	int n, rc = 0;

	if (size < JMP_LEN && room < JMP_LEN) {
		patch_errf(err, errlen, 0, "the function is %zu bytes, shorter than the %d-byte jump",
		     size, JMP_LEN);
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	all = calloc(scan, sizeof(*all));
	if (!s || !all) {
		free(s);
		free(all);
		errno = ENOMEM;
		return NULL;
	}
	s->func = func;
	s->size = size;
	s->trap_slot = -1;
	s->tramp_slot = -1;
	n = dec_range(func, scan, f, all, scan, &bad, err, errlen);
	if (n < 0) {
		rc = n;
		goto out;
	}
	for (int i = 0; i < n && s->len < JMP_LEN; i++) {
		const struct dinsn *d = &all[i];

		/* A return that ends the patched bytes moves as it is: the
		 * function ends there, nothing after it in the patched range
		 * runs (gcc -O2's "lea (%rdi,%rsi),%rax; ret") */
		if (is_plain_ret(d) && (s->len + d->size >= JMP_LEN ||
					s->len + d->size == size)) {
			s->head[s->nhead++] = *d;
			s->len += d->size;
			break;
		}
		why = unmovable(d, s->len + d->size >= JMP_LEN);
		if (why) {
			rc = patch_errf(err, errlen, -EINVAL, "instruction %d at +%zu (%s) %s", i,
					s->len, d->text, why);
			goto out;
		}
		s->head[s->nhead++] = *d;
		s->len += d->size;
	}
	if (s->len < JMP_LEN && s->len == size && s->nhead &&
	    is_plain_ret(&s->head[s->nhead - 1]) && padding(func, s->len, room))
		s->len = JMP_LEN;	/* the jump's tail lands in padding */
	if (s->len < JMP_LEN && size < JMP_LEN) {
		rc = patch_errf(err, errlen, -EINVAL, "the function is %zu bytes, shorter than the "
			  "%d-byte jump, and not followed by padding", size, JMP_LEN);
		goto out;
	}
	if (s->len < JMP_LEN) {
		rc = patch_errf(err, errlen, -EINVAL, "cannot decode %d whole bytes at the start "
			  "(%#llx is not an instruction)", JMP_LEN, (unsigned long long)bad);
		goto out;
	}
	s->nop = true;
	for (int i = 0; i < s->nhead; i++)
		s->nop &= is_nop(&s->head[i]);
	/* A branch among the patched bytes to another of them goes to its
	 * copy: it must be the start of one. */
	for (int i = 0; i < s->nhead; i++)
		if (s->head[i].rel && s->head[i].target >= f && s->head[i].target < f + s->len &&
		    !head_at(s, s->head[i].target)) {
			rc = patch_errf(err, errlen, -EINVAL, "instruction %d (%s) jumps into the "
					"middle of an instruction (+%llu)", i, s->head[i].text,
					(unsigned long long)(s->head[i].target - f));
			goto out;
		}
	/* No other jump of the function may land inside the patched bytes. */
	for (int i = s->nhead; i < n; i++)
		if (all[i].rel && all[i].target > f && all[i].target < f + s->len) {
			rc = patch_errf(err, errlen, -EINVAL, "the instruction at +%llu (%s) jumps "
				  "into the patched bytes (+%llu)",
				  (unsigned long long)(all[i].addr - f), all[i].text,
				  (unsigned long long)(all[i].target - f));
			goto out;
		}
	memcpy(s->orig, func, s->len);
out:
	free(all);
	if (rc) {
		free(s);
		errno = -rc;
		return NULL;
	}
	return s;
}

size_t patch_site_len(const struct patch_site *s)
{
	return s->len;
}

uint64_t patch_site_return_point(const struct patch_site *s)
{
	return s->ret_at ? (uint64_t)(uintptr_t)s->tramp + s->ret_at : 0;
}

uint64_t patch_site_trampoline(const struct patch_site *s, size_t *size)
{
	*size = s->tramp ? s->tramp_map : 0;
	return (uint64_t)(uintptr_t)s->tramp;
}

bool patch_site_nop(const struct patch_site *s)
{
	return s->nop;
}

const char *patch_site_first(const struct patch_site *s)
{
	return s->head[0].text;
}

int patch_site_arm(struct patch_site *s, patch_fn on_entry, patch_fn on_exit,
		   void *arg, char *err, size_t errlen)
{
	return patch_site_arm_flags(s, on_entry, on_exit, arg, 0, err, errlen);
}

int patch_site_arm_flags(struct patch_site *s, patch_fn on_entry, patch_fn on_exit,
			 void *arg, unsigned int flags, char *err, size_t errlen)
{
	uint8_t jmp[JMP_LEN];
	const char *trap;
	int32_t rel;
	int rc;

	if (s->armed || s->tramp)
		return patch_errf(err, errlen, -EBUSY, "the site is already armed");
	rc = patch_build(s, on_entry, on_exit, arg, flags, err, errlen);
	if (rc)
		return rc;
	rel = (int32_t)((intptr_t)s->tramp - (intptr_t)(s->func + JMP_LEN));
	jmp[0] = 0xe9;
	memcpy(jmp + 1, &rel, 4);
	s->unreached = flags & PATCH_ARM_UNREACHED;
	trap = patch_site_traps(s, true);
	rc = patch_live_write(s, jmp, true);
	if (rc == -EAGAIN)
		return patch_errf(err, errlen, rc, "writing the jump: a thread kept SIGTRAP "
				  "blocked for 100 ms (it would die on the int3 the write "
				  "needs: %s)", trap ? trap : "?");
	if (rc == -EBUSY)
		return patch_errf(err, errlen, rc, "writing the jump: a thread that blocks every "
				  "signal may be stopped inside the first %zu bytes (it could "
				  "not be moved out of them)", s->len);
	if (rc)
		return patch_errf(err, errlen, rc, "writing the jump: %s", strerror(-rc));
	s->armed = true;
	return 0;
}

bool patch_site_ours(const struct patch_site *s)
{
	int32_t rel = (int32_t)((intptr_t)s->tramp - (intptr_t)(s->func + JMP_LEN));

	return s->armed && s->func[0] == 0xe9 && !memcmp(s->func + 1, &rel, 4);
}

void patch_site_forget(struct patch_site *s)
{
	s->armed = false;
	patch_live_forget(s);
	patch_tramp_release(s);
}

int patch_site_disarm(struct patch_site *s)
{
	int rc;

	if (!s->armed)
		return 0;
	rc = patch_live_write(s, s->orig, false);
	if (!rc)
		s->armed = false;
	return rc;
}

void patch_site_free(struct patch_site *s)
{
	if (!s)
		return;
	patch_site_disarm(s);
	/* The trampoline and its unwind information stay: a thread may be
	 * inside the function (its return address in the trampoline).  A
	 * later arm of the function may take it again, unchanged
	 * (patch_build()); never while the jump to it may still be there. */
	if (!s->armed)
		patch_tramp_release(s);
	free(s);
}
