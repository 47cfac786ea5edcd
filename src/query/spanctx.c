// SPDX-License-Identifier: MIT
/*
 * The spans(...) context (spanctx.h): its fields for the planner, and the
 * fill from a decoded span record for the agent.
 */
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/cgroup.h"
#include "query/plan.h"
#include "query/spanctx.h"

#define U64(n, o) { .name = n, .ctype = "u64", .offset = o, .size = 8 }
#define STR(n, o, s) { .name = n, .ctype = "char[]", .offset = o, .size = s, .is_string = true }

static const struct tp_field span_fields[] = {
	[F_TIME] = U64("time", 0),
	[F_DURATION] = U64("duration", 8),
	[F_TRACE_ID] = U64("trace_id", 16),
	[F_SPAN_ID] = U64("span_id", 24),
	[F_PARENT_ID] = U64("parent_id", 32),
	[F_PID] = U64("pid", 40),
	[F_ERROR] = U64("error", 48),
	[F_TRACE_HI] = U64("trace_id_hi", 56),
	[F_KIND] = STR("kind", 64, SPANCTX_KIND_LEN),
	[F_NAME] = STR("name", 80, SPANCTX_STR),
	[F_SERVICE] = STR("service", 144, SPANCTX_STR),
	[F_CGROUP] = STR("cgroup", 208, SPANCTX_STR),
	[F_CONTAINER] = STR("container", 272, SPANCTX_STR),
};

_Static_assert(272 + SPANCTX_STR == SPANCTX_FIXED, "spanctx layout");

const struct tp_field *spanctx_field(enum field_id f)
{
	if ((size_t)f >= sizeof(span_fields) / sizeof(span_fields[0]) || !span_fields[f].name)
		return NULL;
	return &span_fields[f];
}

size_t spanctx_size(int ntags)
{
	return SPANCTX_FIXED + (size_t)(ntags > 0 ? ntags : 0) * SPANCTX_STR;
}

const char *spanctx_kind_name(unsigned kind)
{
	switch (kind) {
	case SPAN_KIND_CLIENT: return "client";
	case SPAN_KIND_SERVER: return "server";
	case SPAN_KIND_PRODUCER: return "producer";
	case SPAN_KIND_CONSUMER: return "consumer";
	default: return "";
	}
}

static bool str_is(struct spanrec_str s, const char *z)
{
	size_t n = strlen(z);

	return s.len == n && !memcmp(s.p, z, n);
}

bool spanctx_match(const struct plan *p, const struct spanrec *r, const char *proc_service)
{
	char svc[SPANCTX_STR + 1];

	if (!p->target)
		return true;
	if (r->local.present && r->local.service.len) {
		size_t n = r->local.service.len < SPANCTX_STR ? r->local.service.len : SPANCTX_STR;

		memcpy(svc, r->local.service.p, n);
		svc[n] = '\0';
	} else {
		snprintf(svc, sizeof(svc), "%s", proc_service ? proc_service : "");
	}
	return !fnmatch(p->target, svc, 0);
}
/* Copy a string into a slot of size bytes (the rest stays zero: the
 * caller cleared it); a longer one is cut. */
static void put_str(char *slot, size_t size, const char *s, size_t len)
{
	if (len)
		memcpy(slot, s, len < size ? len : size);
}

void spanctx_fill(const struct plan *p, const struct spanrec *r,
		  const char *proc_service, uint32_t pid, const char *cgroup,
		  const char *container, void *ctx)
{
	unsigned char *c = ctx;
	uint64_t v[8] = {
		r->f.start_ns, r->f.duration_ns, r->f.trace_lo, r->f.span_id,
		r->f.parent_id, pid, (r->f.flags & SPAN_F_ERROR) ? 1 : 0, r->f.trace_hi,
	};
	const char *kind = spanctx_kind_name(r->f.kind);
	struct spanrec_item it;
	uint32_t off = 0;

	memset(c, 0, spanctx_size(p->ntags));
	put_str((char *)c + 64, SPANCTX_KIND_LEN, kind, strlen(kind));
	put_str((char *)c + 80, SPANCTX_STR, r->name.p, r->name.len);
	if (r->local.present && r->local.service.len)
		put_str((char *)c + 144, SPANCTX_STR, r->local.service.p, r->local.service.len);
	else if (proc_service)
		put_str((char *)c + 144, SPANCTX_STR, proc_service,
			strnlen(proc_service, SPANCTX_STR));
	if (cgroup)
		cgroup_str_cut((char *)c + 208, SPANCTX_STR, cgroup);
	if (container)
		cgroup_str_cut((char *)c + 272, SPANCTX_STR, container);
	while (spanrec_next(r, &off, &it)) {
		char num[24];

		if (it.type != SPAN_ITEM_TAG && it.type != SPAN_ITEM_TAG_INT)
			continue;
		if (str_is(it.a, "error"))
			v[6] = 1;
		for (int i = 0; i < p->ntags; i++) {
			char *slot = (char *)c + SPANCTX_FIXED + (size_t)i * SPANCTX_STR;

			if (!str_is(it.a, p->tags[i]))
				continue;
			memset(slot, 0, SPANCTX_STR);	/* the last value of a key wins */
			if (it.type == SPAN_ITEM_TAG) {
				put_str(slot, SPANCTX_STR, it.b.p, it.b.len);
			} else {
				int n = snprintf(num, sizeof(num), "%" PRId64, (int64_t)it.val);

				put_str(slot, SPANCTX_STR, num, (size_t)n);
			}
		}
	}
	memcpy(c, v, sizeof(v));
}
