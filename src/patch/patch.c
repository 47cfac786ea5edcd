// SPDX-License-Identifier: MIT
/*
 * The patcher (patch.h has the contract): site analysis, trampolines and
 * the live write protocol.
 *
 * Trampoline, entry and exit probes (S = rsp at the function's entry):
 *
 *   entry:  sub rsp, 296; save the registers as struct patch_regs at
 *           [rsp] and xmm0-7 above (unless PATCH_HANDLERS_KEEP_VECTORS);
 *           on_entry(regs, arg); restore; add
 *   [exit]  sub rsp, 72; copy S+8..S+72 (stack arguments) to rsp..;
 *           call body                      <- return address with CFI
 *           sub rsp, 304; save; on_exit(regs, arg); restore; add;
 *           add rsp, 72; ret               (to the original caller)
 *   body:   the relocated first instructions; jmp func + patched bytes
 *
 * Without an exit probe the entry part falls through into body.  rsp is
 * 16-byte aligned at each handler call.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <linux/membarrier.h>

#include "common/bytes.h"
#include "patch/decode.h"
#include "patch/patch.h"

#define JMP_LEN		5
#define MAX_SCAN	65536	/* bytes of a function decoded for branches */
#define ENTRY_FRAME	296	/* struct patch_regs + xmm0-7; rsp % 16 == 0 */
#define EXIT_FRAME	304
#define ARGS_COPY	72	/* 8 stack argument slots + 8 to align */

void __register_frame(void *begin);
void __deregister_frame(void *begin);

struct patch_site {
	uint8_t *func;
	size_t size;
	struct dinsn head[JMP_LEN];	/* the relocated instructions */
	int nhead;
	size_t len;			/* bytes they cover (>= 5) */
	uint8_t orig[16];
	bool nop, armed;
	uint8_t *tramp;			/* mapping, never unmapped */
	size_t tramp_map;
	uint8_t *body;			/* where the relocated code starts */
	uint8_t *eh;			/* registered .eh_frame, or NULL */
	int trap_slot;			/* in trap_sites, -1 before the first write */
};

static int errf(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int errf(char *err, size_t errlen, int rc, const char *fmt, ...)
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
	int n, rc = 0;

	if (size < JMP_LEN && room < JMP_LEN) {
		errf(err, errlen, 0, "the function is %zu bytes, shorter than the %d-byte jump",
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
		if (d->branch || d->ret) {
			rc = errf(err, errlen, -EINVAL, "instruction %d at +%zu (%s) is a %s: "
				  "it cannot be moved into a trampoline", i, s->len, d->text,
				  d->ret ? "return" : "branch");
			goto out;
		}
		s->head[s->nhead++] = *d;
		s->len += d->size;
	}
	if (s->len < JMP_LEN && s->len == size && s->nhead &&
	    is_plain_ret(&s->head[s->nhead - 1]) && padding(func, s->len, room))
		s->len = JMP_LEN;	/* the jump's tail lands in padding */
	if (s->len < JMP_LEN && size < JMP_LEN) {
		rc = errf(err, errlen, -EINVAL, "the function is %zu bytes, shorter than the "
			  "%d-byte jump, and not followed by padding", size, JMP_LEN);
		goto out;
	}
	if (s->len < JMP_LEN) {
		rc = errf(err, errlen, -EINVAL, "cannot decode %d whole bytes at the start "
			  "(%#llx is not an instruction)", JMP_LEN, (unsigned long long)bad);
		goto out;
	}
	s->nop = true;
	for (int i = 0; i < s->nhead; i++)
		s->nop &= is_nop(&s->head[i]);
	/* No jump of the function may land inside the patched bytes. */
	for (int i = 0; i < n; i++)
		if (all[i].rel && all[i].target > f && all[i].target < f + s->len) {
			rc = errf(err, errlen, -EINVAL, "the instruction at +%llu (%s) jumps "
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

bool patch_site_nop(const struct patch_site *s)
{
	return s->nop;
}

const char *patch_site_first(const struct patch_site *s)
{
	return s->head[0].text;
}

/* ---- code emission ------------------------------------------------------- */

static void b(struct wbuf *w, int n, ...)
{
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		wbuf_u8(w, (uint8_t)va_arg(ap, int));
	va_end(ap);
}

/* mov [rsp + d], reg64 (store) or mov reg64, [rsp + d] (load) */
static void mov_rsp(struct wbuf *w, int reg, int32_t d, bool store)
{
	b(w, 4, 0x48 | (reg & 8 ? 4 : 0), store ? 0x89 : 0x8b, 0x84 | (reg & 7) << 3, 0x24);
	wbuf_le32(w, (uint32_t)d);
}

/* movdqu [rsp + d], xmmN / movdqu xmmN, [rsp + d] */
static void movdqu_rsp(struct wbuf *w, int x, int32_t d, bool store)
{
	b(w, 5, 0xf3, 0x0f, store ? 0x7f : 0x6f, 0x84 | (x & 7) << 3, 0x24);
	wbuf_le32(w, (uint32_t)d);
}

static void rsp_add(struct wbuf *w, int32_t v)	/* add rsp, imm32 */
{
	b(w, 3, 0x48, 0x81, 0xc4);
	wbuf_le32(w, (uint32_t)v);
}

static void movabs(struct wbuf *w, int reg, uint64_t v)
{
	b(w, 2, 0x48 | (reg & 8 ? 1 : 0), 0xb8 + (reg & 7));
	wbuf_le64(w, v);
}

/* x86 register number and its struct patch_regs offset. */
static const struct { uint8_t reg, off; } saved[] = {
	{ 15, 0 }, { 14, 8 }, { 13, 16 }, { 12, 24 }, { 5, 32 }, { 3, 40 },
	{ 11, 48 }, { 10, 56 }, { 9, 64 }, { 8, 72 }, { 0, 80 }, { 1, 88 },
	{ 2, 96 }, { 6, 104 }, { 7, 112 },
};

/*
 * Save the registers in a frame of `frame` bytes, call fn(regs, arg),
 * restore.  ip is the function (entry) or the return address at
 * [rsp + ip_at] (exit); sp is rsp + sp_at.
 */
static void call_handler(struct wbuf *w, int frame, patch_fn fn, void *arg,
			 uint64_t ip, int ip_at, int sp_at, bool vec)
{
	rsp_add(w, -frame);
	for (size_t i = 0; i < sizeof(saved) / sizeof(saved[0]); i++)
		mov_rsp(w, saved[i].reg, saved[i].off, true);
	for (int x = 0; vec && x < 8; x++)
		movdqu_rsp(w, x, 168 + 16 * x, true);
	mov_rsp(w, 0, 120, true);			/* orig_ax = ax */
	if (ip_at >= 0)
		mov_rsp(w, 11, frame + ip_at, false);
	else
		movabs(w, 11, ip);
	mov_rsp(w, 11, 128, true);			/* ip */
	b(w, 4, 0x4c, 0x8d, 0x9c, 0x24);		/* lea r11, [rsp + d] */
	wbuf_le32(w, (uint32_t)(frame + sp_at));
	mov_rsp(w, 11, 152, true);			/* sp */
	for (int off = 136; off <= 160; off += 8)	/* cs flags ss: 0 */
		if (off != 152) {
			b(w, 4, 0x48, 0xc7, 0x84, 0x24);
			wbuf_le32(w, (uint32_t)off);
			wbuf_le32(w, 0);
		}
	b(w, 3, 0x48, 0x89, 0xe7);			/* mov rdi, rsp */
	movabs(w, 6, (uint64_t)(uintptr_t)arg);		/* rsi */
	movabs(w, 0, (uint64_t)(uintptr_t)fn);		/* rax */
	b(w, 2, 0xff, 0xd0);				/* call rax */
	for (int x = 0; vec && x < 8; x++)
		movdqu_rsp(w, x, 168 + 16 * x, false);
	/* the handler kept rbx, rbp, r12-r15 (the System V ABI) */
	for (size_t i = 0; i < sizeof(saved) / sizeof(saved[0]); i++)
		if (saved[i].reg != 3 && saved[i].reg != 5 && saved[i].reg < 12)
			mov_rsp(w, saved[i].reg, saved[i].off, false);
	rsp_add(w, frame);
}

/* A mapping within +-2 GiB of near (RIP-relative operands must reach). */
static void *map_near(uint8_t *near, size_t size)
{
	uintptr_t base = (uintptr_t)near & ~(uintptr_t)0xfffff;

	for (uintptr_t d = 1u << 20; d < (1u << 30); d += 1u << 20)
		for (int sgn = -1; sgn <= 1; sgn += 2) {
			uintptr_t a = sgn < 0 ? base - d : base + d;
			void *p = mmap((void *)a, size, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

			if (p != MAP_FAILED) {
				if ((uintptr_t)p == a)
					return p;
				munmap(p, size);
			}
		}
	return NULL;
}

/* An .eh_frame (CIE + FDE + end) saying: at [pc, pc+len) the CFA is
 * rsp + cfa and the return address is at CFA - 8. */
static uint8_t *eh_frame(uint64_t pc, uint64_t len, int cfa)
{
	struct wbuf w = { 0 };
	size_t fde;

	/* CIE */
	wbuf_le32(&w, 0);			/* length, below */
	wbuf_le32(&w, 0);			/* CIE id */
	b(&w, 4, 1, 'z', 'R', 0);		/* version, augmentation */
	b(&w, 3, 1, 0x78, 16);			/* code 1, data -8, RA = r16 */
	b(&w, 2, 1, 0x00);			/* aug data: FDE ptrs absptr */
	b(&w, 3, 0x0c, 7, cfa);			/* def_cfa rsp, cfa */
	b(&w, 2, 0x90, 1);			/* offset r16, cfa-8 */
	while (w.len % 8 != 4 && !w.err)
		wbuf_u8(&w, 0);			/* DW_CFA_nop */
	if (!w.err)
		memcpy(w.p, &(uint32_t){ (uint32_t)w.len - 4 }, 4);
	/* FDE */
	fde = w.len;
	wbuf_le32(&w, 0);
	wbuf_le32(&w, (uint32_t)(w.len));	/* back to the CIE */
	wbuf_le64(&w, pc);
	wbuf_le64(&w, len);
	wbuf_u8(&w, 0);				/* aug data length */
	while ((w.len - fde) % 8 && !w.err)
		wbuf_u8(&w, 0);
	if (!w.err)
		memcpy(w.p + fde, &(uint32_t){ (uint32_t)(w.len - fde - 4) }, 4);
	wbuf_le32(&w, 0);			/* end */
	if (w.err) {
		wbuf_free(&w);
		return NULL;
	}
	return w.p;
}

static int build(struct patch_site *s, patch_fn on_entry, patch_fn on_exit, void *arg,
		 unsigned int flags, char *err, size_t errlen)
{
	bool vec = !(flags & PATCH_HANDLERS_KEEP_VECTORS);
	struct wbuf w = { 0 };
	uint8_t *t;
	size_t call_at = 0, body_at, fix = 0;
	uint64_t f = (uint64_t)(uintptr_t)s->func;

	s->tramp_map = 4096;
	t = map_near(s->func, s->tramp_map);
	if (!t)
		return errf(err, errlen, -ENOMEM, "no room for a trampoline within 2 GiB "
			    "of the function");
	call_handler(&w, ENTRY_FRAME, on_entry, arg, f, -1, 0, vec);
	if (on_exit) {
		rsp_add(&w, -ARGS_COPY);
		for (int i = 0; i < 8; i++) {
			mov_rsp(&w, 11, ARGS_COPY + 8 + 8 * i, false);
			mov_rsp(&w, 11, 8 * i, true);
		}
		call_at = w.len;
		b(&w, 1, 0xe8);				/* call body */
		fix = w.len;
		wbuf_le32(&w, 0);
		call_handler(&w, EXIT_FRAME, on_exit, arg, 0, ARGS_COPY, ARGS_COPY + 8, vec);
		rsp_add(&w, ARGS_COPY);
		b(&w, 1, 0xc3);
	}
	body_at = w.len;
	for (int i = 0; i < s->nhead; i++) {
		struct dinsn d = s->head[i];

		if (d.rip_rel) {
			int32_t disp;
			int64_t nd;

			memcpy(&disp, d.bytes + d.disp_off, 4);
			nd = (int64_t)disp + (int64_t)d.addr - (int64_t)((uint64_t)(uintptr_t)t + w.len);
			if (nd < INT32_MIN || nd > INT32_MAX) {
				munmap(t, s->tramp_map);
				wbuf_free(&w);
				return errf(err, errlen, -ERANGE, "%s: the RIP-relative operand "
					    "is out of reach of the trampoline", d.text);
			}
			disp = (int32_t)nd;
			memcpy(d.bytes + d.disp_off, &disp, 4);
		}
		wbuf_put(&w, d.bytes, d.size);
	}
	b(&w, 6, 0xff, 0x25, 0, 0, 0, 0);		/* jmp [rip+0] */
	wbuf_le64(&w, f + s->len);
	if (w.err || w.len > s->tramp_map) {
		munmap(t, s->tramp_map);
		wbuf_free(&w);
		return -ENOMEM;
	}
	if (on_exit) {
		int32_t rel = (int32_t)(body_at - (fix + 4));

		memcpy(w.p + fix, &rel, 4);
	}
	memcpy(t, w.p, w.len);
	wbuf_free(&w);
	if (mprotect(t, s->tramp_map, PROT_READ | PROT_EXEC)) {
		munmap(t, s->tramp_map);
		return errf(err, errlen, -errno, "mprotect of the trampoline: %s",
			    strerror(errno));
	}
	s->tramp = t;
	s->body = t + body_at;
	if (on_exit) {
		/* The return address after "call body": CFA = rsp + 72 + 8. */
		s->eh = eh_frame((uint64_t)(uintptr_t)t + call_at, 5 + 1, ARGS_COPY + 8);
		if (s->eh)
			__register_frame(s->eh);
	}
	return 0;
}

/* ---- live writes --------------------------------------------------------- */

/*
 * The SIGTRAP handler.  A thread that executed the int3 of a site being
 * written may have its SIGTRAP delivered late (it was descheduled between
 * the trap and the delivery, where membarrier does not reach), after the
 * write is over: so the handler stays installed once a site was written
 * (other SIGTRAPs go to the program's handler), and every site ever
 * written is remembered (the slots are never reused, as trampolines).
 * A thread stopped at func + 1 is sent where the current bytes send it:
 * to the trampoline if the site is armed, else to the relocated original
 * instructions (the same as the function's own).
 */
#define MAX_SITES	4096

static struct trap_site {
	uint64_t func;
	uint8_t *tramp, *body;
	volatile int armed;
} trap_sites[MAX_SITES];
static int ntrap_sites;
static struct sigaction old_trap;
static int trap_installed;

static void on_trap(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	uint64_t pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	int n = __atomic_load_n(&ntrap_sites, __ATOMIC_ACQUIRE);

	for (int i = 0; i < n; i++)
		if (pc == trap_sites[i].func + 1) {
			uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)
				(trap_sites[i].armed ? trap_sites[i].tramp : trap_sites[i].body);
			return;
		}
	/* Not ours: what the program would have had. */
	if (old_trap.sa_flags & SA_SIGINFO) {
		if (old_trap.sa_sigaction)
			old_trap.sa_sigaction(sig, si, uc_);
	} else if (old_trap.sa_handler != SIG_IGN && old_trap.sa_handler != SIG_DFL) {
		old_trap.sa_handler(sig);
	} else if (old_trap.sa_handler == SIG_DFL) {
		signal(SIGTRAP, SIG_DFL);
		raise(SIGTRAP);
	}
}

/* s's slot in trap_sites (added on first use), or -1 when full. */
static int trap_slot(struct patch_site *s)
{
	struct sigaction sa = { .sa_sigaction = on_trap, .sa_flags = SA_SIGINFO };

	if (!trap_installed) {
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGTRAP, &sa, &old_trap))
			return -1;
		trap_installed = 1;
	}
	if (s->trap_slot >= 0)
		return s->trap_slot;
	if (ntrap_sites >= MAX_SITES)
		return -1;
	trap_sites[ntrap_sites] = (struct trap_site){ (uint64_t)(uintptr_t)s->func,
						      s->tramp, s->body, 0 };
	__atomic_store_n(&ntrap_sites, ntrap_sites + 1, __ATOMIC_RELEASE);
	return s->trap_slot = ntrap_sites - 1;
}

/*
 * Threads stopped between two of the instructions being replaced (after
 * the first) would resume in the middle of the jump: once the int3 keeps
 * newcomers out, each other thread is sent MOVE_SIG and its handler moves
 * a PC found inside the patched bytes to the same instruction in the
 * trampoline's relocated copy (same sizes, same offsets), which runs on
 * and jumps back past the patch.  The handler is installed only for this
 * round; a MOVE_SIG that is not ours goes to the program's handler.
 */
#define MOVE_SIG	(SIGRTMAX - 1)
#define MAX_TASKS	4096

static struct patch_site *volatile moving;
static pid_t move_tids[MAX_TASKS];
static volatile int move_acked[MAX_TASKS];
static int move_n;
static struct sigaction old_move;

static void on_move(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	struct patch_site *s = moving;
	pid_t me = (pid_t)syscall(SYS_gettid);

	if (!s || si->si_code != SI_TKILL || si->si_pid != getpid()) {
		if (old_move.sa_flags & SA_SIGINFO) {
			if (old_move.sa_sigaction)
				old_move.sa_sigaction(sig, si, uc_);
		} else if (old_move.sa_handler != SIG_IGN && old_move.sa_handler != SIG_DFL) {
			old_move.sa_handler(sig);
		}
		return;
	}
	uint64_t pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	uint64_t f = (uint64_t)(uintptr_t)s->func;

	if (pc > f && pc < f + s->len)
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)((uintptr_t)s->body + (pc - f));
	for (int i = 0; i < move_n; i++)
		if (move_tids[i] == me)
			__atomic_store_n(&move_acked[i], 1, __ATOMIC_RELEASE);
}

static int move_threads(struct patch_site *s)
{
	struct sigaction sa = { .sa_sigaction = on_move, .sa_flags = SA_SIGINFO | SA_RESTART };
	pid_t self = (pid_t)syscall(SYS_gettid), pid = getpid();
	char path[64];
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int rc = 0;

	if (!d)
		return -errno;
	move_n = 0;
	while ((e = readdir(d)) && move_n < MAX_TASKS) {
		pid_t t = (pid_t)atoi(e->d_name);

		if (t > 0 && t != self) {
			move_acked[move_n] = 0;
			move_tids[move_n++] = t;
		}
	}
	closedir(d);
	sigemptyset(&sa.sa_mask);
	moving = s;
	sigaction(MOVE_SIG, &sa, &old_move);
	for (int i = 0; i < move_n; i++)
		if (syscall(SYS_tgkill, pid, move_tids[i], MOVE_SIG))
			move_acked[i] = 1;		/* gone */
	for (int i = 0; i < move_n && !rc; i++) {
		for (int w = 0; !__atomic_load_n(&move_acked[i], __ATOMIC_ACQUIRE); w++) {
			snprintf(path, sizeof(path), "/proc/self/task/%d", (int)move_tids[i]);
			if (access(path, F_OK))
				break;			/* exited meanwhile */
			if (w > 20000) {		/* ~1 s */
				rc = -ETIMEDOUT;
				break;
			}
			usleep(50);
		}
	}
	moving = NULL;
	/* On a timeout the signal may still be pending somewhere: leave the
	 * handler (it ignores it now) rather than let it kill the process. */
	if (!rc)
		sigaction(MOVE_SIG, &old_move, NULL);
	return rc;
}

static int sync_cores(void)
{
	static int registered;

	if (!registered) {
		if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
			    0, 0))
			return -errno;
		registered = 1;
	}
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0))
		return -errno;
	return 0;
}

/* Replace the first 5 bytes with new[] (int3, tail, head). */
static int live_write(struct patch_site *s, const uint8_t *new, bool to_patch)
{
	uintptr_t pg = (uintptr_t)s->func & ~(uintptr_t)4095;
	size_t span = ((uintptr_t)s->func + JMP_LEN - pg + 4095) & ~(size_t)4095;
	int slot = trap_slot(s), rc;

	if (slot < 0)
		return -ENOSPC;
	if (mprotect((void *)pg, span, PROT_READ | PROT_WRITE | PROT_EXEC))
		return -errno;
	/* armed while the patch is going in, so that a trapped thread
	 * takes the trampoline; not armed while it is going out */
	trap_sites[slot].armed = to_patch;
	__atomic_store_n(s->func, (uint8_t)0xcc, __ATOMIC_SEQ_CST);
	rc = sync_cores();
	if (!rc && to_patch && s->nhead > 1)
		rc = move_threads(s);
	if (!rc) {
		memcpy(s->func + 1, new + 1, JMP_LEN - 1);
		rc = sync_cores();
	}
	if (!rc) {
		__atomic_store_n(s->func, new[0], __ATOMIC_SEQ_CST);
		rc = sync_cores();
	}
	if (rc) {	/* put the original bytes back */
		memcpy(s->func + 1, s->orig + 1, JMP_LEN - 1);
		__atomic_store_n(s->func, s->orig[0], __ATOMIC_SEQ_CST);
		trap_sites[slot].armed = 0;
	}
	mprotect((void *)pg, span, PROT_READ | PROT_EXEC);
	return rc;
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
	int32_t rel;
	int rc;

	if (s->armed || s->tramp)
		return errf(err, errlen, -EBUSY, "the site is already armed");
	rc = build(s, on_entry, on_exit, arg, flags, err, errlen);
	if (rc)
		return rc;
	rel = (int32_t)((intptr_t)s->tramp - (intptr_t)(s->func + JMP_LEN));
	jmp[0] = 0xe9;
	memcpy(jmp + 1, &rel, 4);
	rc = live_write(s, jmp, true);
	if (rc)
		return errf(err, errlen, rc, "writing the jump: %s", strerror(-rc));
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
}

int patch_site_disarm(struct patch_site *s)
{
	int rc;

	if (!s->armed)
		return 0;
	rc = live_write(s, s->orig, false);
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
	 * inside the function (its return address in the trampoline). */
	free(s);
}
