// SPDX-License-Identifier: MIT
/*
 * Plan dumps: text (stable, diffed by tests/golden) and JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/json_str.h"
#include "query/plan.h"
#include "query/spanctx.h"
#include "query/query_int.h"

static const char *const px_sym[PX_NOPS] = {
	[PX_NEG] = "-", [PX_NOT] = "!", [PX_BNOT] = "~",
	[PX_ADD] = "+", [PX_SUB] = "-", [PX_MUL] = "*", [PX_DIV] = "/",
	[PX_MOD] = "%", [PX_AND] = "&", [PX_OR] = "|", [PX_XOR] = "^",
	[PX_SHL] = "<<", [PX_SHR] = ">>", [PX_EQ] = "==", [PX_NE] = "!=",
	[PX_LT] = "<", [PX_LE] = "<=", [PX_GT] = ">", [PX_GE] = ">=",
	[PX_LAND] = "&&", [PX_LOR] = "||", [PX_STREQ] = "==",
	[PX_STRNE] = "!=",
};

static const char *const px_names[PX_NOPS] = {
	[PX_CONST] = "const", [PX_STR] = "string", [PX_FIELD] = "field",
	[PX_ARG] = "arg", [PX_SAVED] = "saved", [PX_TPFIELD] = "tpfield",
	[PX_LET] = "let", [PX_STRREAD] = "strread", [PX_NEG] = "neg",
	[PX_NOT] = "not", [PX_BNOT] = "bnot", [PX_ADD] = "add",
	[PX_SUB] = "sub", [PX_MUL] = "mul", [PX_DIV] = "div", [PX_MOD] = "mod",
	[PX_AND] = "and", [PX_OR] = "or", [PX_XOR] = "xor", [PX_SHL] = "shl",
	[PX_SHR] = "shr", [PX_EQ] = "eq", [PX_NE] = "ne", [PX_LT] = "lt",
	[PX_LE] = "le", [PX_GT] = "gt", [PX_GE] = "ge", [PX_LAND] = "land",
	[PX_LOR] = "lor", [PX_STREQ] = "streq", [PX_STRNE] = "strne",
	[PX_KEY] = "key", [PX_AGG] = "aggregate",
};

void pexpr_print(const struct plan *p, const struct pexpr *e, FILE *f)
{
	switch (e->op) {
	case PX_CONST:
		fprintf(f, "%" PRId64, e->val);
		break;
	case PX_STR:
		dump_cstr(f, e->str, e->len);
		break;
	case PX_FIELD:
		fputs(e->field == F_PROBE && e->type == VT_INT ? "name_id" :
		      field_name(e->field), f);
		break;
	case PX_ARG:
		fprintf(f, "arg%d", e->idx);
		break;
	case PX_SAVED:
		fprintf(f, "saved[%d]", e->idx);
		break;
	case PX_TPFIELD:
		fprintf(f, "%s.%s", p->source == SRC_SPANS ? "span" : "tp", e->tpf->name);
		break;
	case PX_LET:
		fprintf(f, "$%s", p->lets[e->idx].name);
		break;
	case PX_STRREAD:
		fputs(e->user ? "ustr(" : e->either ? "kustr(" : "kstr(", f);
		pexpr_print(p, e->a, f);
		fputc(')', f);
		break;
	case PX_NEG:
	case PX_NOT:
	case PX_BNOT:
		fputs(px_sym[e->op], f);
		pexpr_print(p, e->a, f);
		break;
	case PX_KEY:
		if (p->ast->group && p->ast->group->tuple)
			fprintf(f, "key.%s", p->keys[e->idx].name);
		else
			fputs("key", f);
		break;
	case PX_AGG:
		fprintf(f, "a%d", e->idx);
		break;
	default:
		fputc('(', f);
		pexpr_print(p, e->a, f);
		fprintf(f, " %s ", px_sym[e->op] ? px_sym[e->op] : "?");
		pexpr_print(p, e->b, f);
		fputc(')', f);
		break;
	}
}

static void put_attach(FILE *f, const char *what, const struct plan_attach *a)
{
	fprintf(f, "  %s ", what);
	switch (a->kind) {
	case PA_NONE:
		fputs("none", f);
		break;
	case PA_TRACEPOINT:
		fprintf(f, "tracepoint %s:%s", a->sys, a->event);
		if (a->args_off >= 0)
			fprintf(f, " args@%d", a->args_off);
		if (a->ret_off >= 0)
			fprintf(f, " ret@%d", a->ret_off);
		break;
	case PA_FENTRY:
		fprintf(f, "fentry %s", a->func);
		break;
	case PA_FEXIT:
		fprintf(f, "fexit %s", a->func);
		break;
	case PA_UPROBE:
	case PA_URETPROBE:
		fprintf(f, "%s %s:%s", a->kind == PA_UPROBE ? "uprobe" : "uretprobe",
			a->binary ? a->binary : "(exe)", a->symbol);
		if (a->pid)
			fprintf(f, " pid=%d", a->pid);
		break;
	case PA_USDT:
		fprintf(f, "usdt %s:%s:%s", a->binary, a->provider, a->name);
		break;
	case PA_PERF_SAMPLE:
		fprintf(f, "perf-sample %u Hz on every CPU", a->hz);
		break;
	case PA_SPANS:
		fputs("spans drained by fay agent, run in its VM", f);
		break;
	}
	fputc('\n', f);
}

static void put_type(FILE *f, enum vtype t, int size)
{
	if (t == VT_STR)
		fprintf(f, "string[%d]", size);
	else if (t == VT_DIST)
		fputs("dist", f);
	else
		fputs("int", f);
}

/* The three parts of an aggregate, in words (docs/QUERY.md has more). */
static void aggr_parts(const struct aggr_desc *d, const char **probe,
		       const char **merge, const char **final)
{
	switch (d->kind) {
	case AGGR_COUNT:
		*probe = "n += 1"; *merge = "n1 + n2"; *final = "n";
		break;
	case AGGR_SUM:
		*probe = "s += v"; *merge = "s1 + s2"; *final = "s";
		break;
	case AGGR_MIN:
		*probe = "m = n ? min(m, v) : v; n += 1";
		*merge = "min of the non-empty sides; n1 + n2"; *final = "m";
		break;
	case AGGR_MAX:
		*probe = "m = n ? max(m, v) : v; n += 1";
		*merge = "max of the non-empty sides; n1 + n2"; *final = "m";
		break;
	case AGGR_AVG:
		*probe = "s += v; n += 1"; *merge = "s1 + s2, n1 + n2";
		*final = "s / n";
		break;
	case AGGR_HIST:
		*probe = "b[log2(v) + 1] += 1 (b[0]: v <= 0)";
		*merge = "add buckets"; *final = "64 power-of-two buckets";
		break;
	case AGGR_LHIST:
		*probe = "b[(v - lo) / step + 1] += 1 (b[0] below lo, b[nb+1] at or above hi)";
		*merge = "add buckets"; *final = "linear buckets";
		break;
	case AGGR_QUANTILE:
		*probe = "b[log-linear bucket(v)] += 1 (16 per power of two)";
		*merge = "add buckets";
		*final = "middle of the bucket at rank ceil(p*n), relative error <= 3.125%";
		break;
	case AGGR_DISTINCT:
		*probe = "h = fmix64(v); r[h >> 54] = max(r[h >> 54], clz(h << 10) + 1)";
		*merge = "max per register";
		*final = "HyperLogLog estimate, standard error 3.25%";
		break;
	default:
		*probe = *merge = *final = "?";
	}
}

int plan_dump(const struct plan *p, FILE *f)
{
	fprintf(f, "plan\n  source %s", src_kind_name(p->source));
	if (p->target)
		fprintf(f, " \"%s\"", p->target);
	fputc('\n', f);
	put_attach(f, "entry", &p->entry);
	put_attach(f, "exit", &p->exit);
	if (p->ctx_size) {
		fprintf(f, "  span context %d bytes: fixed fields at 0..%d", p->ctx_size,
			SPANCTX_FIXED);
		for (int i = 0; i < p->ntags; i++)
			fprintf(f, ", tag \"%s\" at %d", p->tags[i], SPANCTX_FIXED + i * SPANCTX_STR);
		fputc('\n', f);
	}
	if (p->names) {
		const struct plan_names *t = p->names;
		int named = 0;

		for (int i = 0; i < t->n; i++)
			named += t->name[i] != NULL;
		fprintf(f, "  name the %s: ", t->what);
		if (t->src == PN_CONST)
			fprintf(f, "\"%s\" (%s), id 0 in the probe", t->name[0], t->how);
		else if (t->src == PN_COOKIE)
			fprintf(f, "%d names (%s), the id the attachment's BPF cookie",
				named, t->how);
		else
			fprintf(f, "%d names (%s), the id the word at ctx+%d", named,
				t->how, t->ctx_off);
		fputc('\n', f);
	}
	if (p->paired) {
		fprintf(f, "  pairing per-thread hash map (key tid, %d entries), record %d bytes:",
			p->max_entries, p->saved_size);
		for (int i = 0; i < p->nsaved; i++) {
			if (p->saved[i].kind == SAVE_TIME)
				fprintf(f, " [%d] entry time", i);
			else
				fprintf(f, " [%d] arg%d", i, p->saved[i].arg);
		}
		fputc('\n', f);
		fputs("  entry predicate ", f);
		if (p->entry_pred)
			pexpr_print(p, p->entry_pred, f);
		else
			fputs("true", f);
		fputc('\n', f);
	}
	for (int i = 0; i < p->nlets; i++) {
		fprintf(f, "  let $%s = ", p->lets[i].name);
		pexpr_print(p, p->lets[i].e, f);
		fputc('\n', f);
	}
	fputs("  predicate ", f);
	if (p->pred)
		pexpr_print(p, p->pred, f);
	else
		fputs("true", f);
	fputc('\n', f);

	if (p->mode == PLAN_STREAM) {
		fprintf(f, "  mode stream: one %d-byte record per event\n", p->record_size);
		for (int i = 0; i < p->ncols; i++) {
			const struct plan_col *c = &p->cols[i];

			fprintf(f, "    column \"%s\" @%d ", c->name, c->offset);
			put_type(f, c->type, c->size);
			fputs(" = ", f);
			pexpr_print(p, c->e, f);
			fputc('\n', f);
		}
	} else {
		if (p->key_size)
			fprintf(f, "  mode aggregate: per-CPU hash, %d entries, key %d bytes, value %d bytes\n",
				p->max_entries, p->bpf_key_size, p->value_size);
		else
			fprintf(f, "  mode aggregate: per-CPU array of 1 entry (no key), value %d bytes\n",
				p->value_size);
		if (p->stack_depth)
			fprintf(f, "  stacks: the frames kept under their hash (BPF: fay_stk; inline: the runtime's stack table), %d frames; the reader names the frames into a key of %d bytes\n",
				p->stack_depth, p->key_size);
		for (int i = 0; i < p->nkeys; i++) {
			const struct plan_key *k = &p->keys[i];

			if (k->stack) {
				fprintf(f, "    key \"%s\" @%d stack id%s = %s(%d)\n", k->name,
					k->bpf_offset, k->stack == PSTACK_USER ? ", tgid" : "",
					k->stack == PSTACK_USER ? "ustack" : "kstack", k->depth);
				continue;
			}
			fprintf(f, "    key \"%s\" @%d ", k->name, k->bpf_offset);
			put_type(f, k->e->type, k->size);
			fputs(" = ", f);
			pexpr_print(p, k->e, f);
			fputc('\n', f);
		}
		for (int i = 0; i < p->naggrs; i++) {
			const struct plan_aggr *a = &p->aggrs[i];
			const char *probe, *merge, *final;

			aggr_parts(&a->desc, &probe, &merge, &final);
			fprintf(f, "    a%d %s @%d size %zu", i, aggr_name(a->desc.kind),
				a->offset, a->desc.size);
			if (a->desc.kind == AGGR_LHIST)
				fprintf(f, " lo=%" PRId64 " hi=%" PRId64 " step=%" PRId64 " buckets=%u",
					a->desc.lo, a->desc.hi, a->desc.step,
					a->desc.nbuckets);
			if (a->desc.kind == AGGR_QUANTILE)
				fprintf(f, " p=%g", a->desc.p);
			if (a->share >= 0)
				fprintf(f, " (the sketch of a%d)", a->share);
			fputs(" of ", f);
			if (a->arg)
				pexpr_print(p, a->arg, f);
			else
				fputs("-", f);
			fprintf(f, "  (%s)\n", a->text);
			fprintf(f, "      probe: %s\n      merge: %s\n      final: %s\n",
				probe, merge, final);
		}
		for (int i = 0; i < p->ncols; i++) {
			const struct plan_col *c = &p->cols[i];

			fprintf(f, "    column \"%s\" ", c->name);
			put_type(f, c->type, c->size);
			fputs(" = ", f);
			if (c->e)
				pexpr_print(p, c->e, f);
			else
				fprintf(f, "buckets of a%d", c->aggr);
			fputc('\n', f);
		}
	}
	fputs("  output ", f);
	if (p->mode == PLAN_STREAM && p->keep_ns) {
		fputs("none: each host keeps its events of the last ", f);
		dump_dur(f, p->keep_ns);
		if (p->keep_max)
			fprintf(f, " (at most %" PRIu64 ")", p->keep_max);
		fputs(" for a capture", f);
	} else if (p->mode == PLAN_STREAM) {
		fputs("rows as events arrive", f);
	} else if (p->window_ns) {
		fputs("a table every ", f);
		dump_dur(f, p->window_ns);
		fputs(" window (per-CPU partials merged on read, then cleared)", f);
	} else {
		fputs("one table at the end (per-CPU partials merged on read)", f);
	}
	fputc('\n', f);
	if (p->for_ns) {
		fputs("  stop after ", f);
		dump_dur(f, p->for_ns);
		fputc('\n', f);
	}
	if (p->order) {
		fputs("  order by ", f);
		pexpr_print(p, p->order, f);
		fputs(p->order_desc ? " desc\n" : " asc\n", f);
	}
	if (p->limit)
		fprintf(f, "  limit %" PRIu64 " rows%s\n", p->limit,
			p->mode == PLAN_AGGREGATE && p->window_ns ? " per window" : "");
	if (p->cat) {
		const struct ast_categorize *c = p->cat;

		fprintf(f, "  categorize %s into ", c->entity);
		if (c->k)
			fprintf(f, "%d", c->k);
		else
			fprintf(f, "auto (1 to %d, by silhouette)", QUERY_CAT_AUTO_MAX_K);
		fprintf(f, " (k-means at the root, per %s) by ",
			p->window_ns ? "window" : "result");
		if (c->pivot)
			fprintf(f, "the mix of %s (shares of %s)\n", c->feat[0],
				p->cols[c->value_col].name);
		else
			for (int j = 0; j < c->nfeat; j++)
				fprintf(f, "%s%s%s", j ? ", " : "", c->feat[j],
					j + 1 < c->nfeat ? "" : " (standardized)\n");
	}
	return ferror(f) ? -EIO : 0;
}

/* ---- JSON ---------------------------------------------------------------- */

static void jexpr(const struct plan *p, const struct pexpr *e, FILE *f)
{
	fprintf(f, "{\"op\":\"%s\"", px_names[e->op]);
	if (e->type == VT_STR)
		fprintf(f, ",\"type\":\"string\",\"size\":%d", e->size);
	switch (e->op) {
	case PX_CONST:
		fprintf(f, ",\"value\":%" PRId64, e->val);
		break;
	case PX_STR:
		fputs(",\"value\":", f);
		json_str(f, e->str, e->len);
		break;
	case PX_FIELD:
		fprintf(f, ",\"field\":\"%s\"", field_name(e->field));
		break;
	case PX_TPFIELD:
		fputs(",\"name\":", f);
		json_str(f, e->tpf->name, strlen(e->tpf->name));
		fprintf(f, ",\"offset\":%d,\"bytes\":%d,\"signed\":%s,\"string\":%s,\"data_loc\":%s",
			e->tpf->offset, e->tpf->size, e->tpf->is_signed ? "true" : "false",
			e->tpf->is_string ? "true" : "false",
			e->tpf->data_loc ? "true" : "false");
		break;
	case PX_STRREAD:
		fprintf(f, ",\"user\":%s,\"memory\":\"%s\"", e->user ? "true" : "false",
			e->user ? "user" : e->either ? "kernel, else user" : "kernel");
		break;
	case PX_ARG:
	case PX_SAVED:
	case PX_LET:
	case PX_KEY:
	case PX_AGG:
		fprintf(f, ",\"index\":%d", e->idx);
		break;
	default:
		break;
	}
	if (e->a) {
		fputs(",\"a\":", f);
		jexpr(p, e->a, f);
	}
	if (e->b) {
		fputs(",\"b\":", f);
		jexpr(p, e->b, f);
	}
	fputc('}', f);
}

static void jopt(const struct plan *p, const char *k, const struct pexpr *e, FILE *f)
{
	fprintf(f, ",\"%s\":", k);
	if (e)
		jexpr(p, e, f);
	else
		fputs("null", f);
}

static void jstr(FILE *f, const char *k, const char *v)
{
	fprintf(f, ",\"%s\":", k);
	if (v)
		json_str(f, v, strlen(v));
	else
		fputs("null", f);
}

static void jattach(FILE *f, const char *k, const struct plan_attach *a)
{
	static const char *const kinds[] = {
		[PA_NONE] = "none", [PA_TRACEPOINT] = "tracepoint",
		[PA_FENTRY] = "fentry", [PA_FEXIT] = "fexit",
		[PA_UPROBE] = "uprobe", [PA_URETPROBE] = "uretprobe",
		[PA_USDT] = "usdt", [PA_PERF_SAMPLE] = "perf_sample",
		[PA_SPANS] = "spans",
	};

	fprintf(f, ",\"%s\":{\"kind\":\"%s\"", k, kinds[a->kind]);
	if (a->sys) {
		jstr(f, "sys", a->sys);
		jstr(f, "event", a->event);
	}
	if (a->func)
		jstr(f, "func", a->func);
	if (a->symbol) {
		jstr(f, "binary", a->binary);
		jstr(f, "symbol", a->symbol);
		fprintf(f, ",\"pid\":%d", a->pid);
	}
	if (a->provider) {
		jstr(f, "binary", a->binary);
		jstr(f, "provider", a->provider);
		jstr(f, "name", a->name);
	}
	if (a->kind == PA_PERF_SAMPLE)
		fprintf(f, ",\"hz\":%u", a->hz);
	fprintf(f, ",\"args_off\":%d,\"ret_off\":%d,\"user\":%s}", a->args_off,
		a->ret_off, a->user ? "true" : "false");
}

int plan_dump_json(const struct plan *p, FILE *f)
{
	fprintf(f, "{\"source\":\"%s\"", src_kind_name(p->source));
	jstr(f, "target", p->target);
	jattach(f, "entry", &p->entry);
	jattach(f, "exit", &p->exit);
	if (p->ctx_size) {
		fprintf(f, ",\"span_context\":{\"bytes\":%d,\"tags\":[", p->ctx_size);
		for (int i = 0; i < p->ntags; i++) {
			fprintf(f, "%s{\"key\":", i ? "," : "");
			json_str(f, p->tags[i], strlen(p->tags[i]));
			fprintf(f, ",\"offset\":%d}", SPANCTX_FIXED + i * SPANCTX_STR);
		}
		fputs("]}", f);
	}
	if (p->names) {
		int named = 0;

		for (int i = 0; i < p->names->n; i++)
			named += p->names->name[i] != NULL;
		fprintf(f, ",\"names\":{\"what\":\"%s\",\"count\":%d,\"from\":\"%s\"}",
			p->names->what, named,
			p->names->src == PN_CONST ? "constant" :
			p->names->src == PN_COOKIE ? "cookie" : "context");
	}
	fprintf(f, ",\"paired\":%s,\"saved\":[", p->paired ? "true" : "false");
	for (int i = 0; i < p->nsaved; i++)
		fprintf(f, "%s{\"slot\":%d,\"kind\":\"%s\",\"arg\":%d}", i ? "," : "",
			i, p->saved[i].kind == SAVE_TIME ? "time" : "arg",
			p->saved[i].kind == SAVE_ARG ? p->saved[i].arg : -1);
	fputc(']', f);
	jopt(p, "entry_pred", p->entry_pred, f);
	fputs(",\"lets\":[", f);
	for (int i = 0; i < p->nlets; i++) {
		fprintf(f, "%s{\"name\":", i ? "," : "");
		json_str(f, p->lets[i].name, strlen(p->lets[i].name));
		jopt(p, "expr", p->lets[i].e, f);
		fputc('}', f);
	}
	fputc(']', f);
	jopt(p, "pred", p->pred, f);
	fprintf(f, ",\"mode\":\"%s\",\"key_size\":%d,\"value_size\":%d,\"record_size\":%d,\"max_entries\":%d,\"keys\":[",
		p->mode == PLAN_STREAM ? "stream" : "aggregate", p->key_size,
		p->value_size, p->record_size, p->max_entries);
	for (int i = 0; i < p->nkeys; i++) {
		fprintf(f, "%s{\"name\":", i ? "," : "");
		json_str(f, p->keys[i].name, strlen(p->keys[i].name));
		fprintf(f, ",\"offset\":%d,\"size\":%d", p->keys[i].offset, p->keys[i].size);
		if (p->keys[i].stack)
			fprintf(f, ",\"stack\":\"%s\",\"depth\":%d",
				p->keys[i].stack == PSTACK_USER ? "ustack" : "kstack",
				p->keys[i].depth);
		jopt(p, "expr", p->keys[i].e, f);
		fputc('}', f);
	}
	fputs("],\"aggregates\":[", f);
	for (int i = 0; i < p->naggrs; i++) {
		const struct plan_aggr *a = &p->aggrs[i];

		fprintf(f, "%s{\"kind\":\"%s\",\"offset\":%d,\"size\":%zu", i ? "," : "",
			aggr_name(a->desc.kind), a->offset, a->desc.size);
		if (a->desc.kind == AGGR_LHIST)
			fprintf(f, ",\"lo\":%" PRId64 ",\"hi\":%" PRId64 ",\"step\":%" PRId64 ",\"buckets\":%u",
				a->desc.lo, a->desc.hi, a->desc.step, a->desc.nbuckets);
		if (a->desc.kind == AGGR_QUANTILE)
			fprintf(f, ",\"p\":%.17g", a->desc.p);
		if (a->share >= 0)
			fprintf(f, ",\"shares\":%d", a->share);
		jstr(f, "text", a->text);
		jopt(p, "arg", a->arg, f);
		fputc('}', f);
	}
	fputs("],\"columns\":[", f);
	for (int i = 0; i < p->ncols; i++) {
		const struct plan_col *c = &p->cols[i];

		fprintf(f, "%s{\"name\":", i ? "," : "");
		json_str(f, c->name, strlen(c->name));
		fprintf(f, ",\"type\":\"%s\",\"size\":%d,\"offset\":%d,\"aggregate\":%d",
			c->type == VT_STR ? "string" : c->type == VT_DIST ? "dist" : "int",
			c->size, c->offset, c->aggr);
		jopt(p, "expr", c->e, f);
		fputc('}', f);
	}
	fprintf(f, "],\"window_ns\":%" PRIu64 ",\"for_ns\":%" PRIu64, p->window_ns,
		p->for_ns);
	if (p->keep_ns)
		fprintf(f, ",\"keep_ns\":%" PRIu64 ",\"keep_max\":%" PRIu64, p->keep_ns,
			p->keep_max);
	jopt(p, "order", p->order, f);
	fprintf(f, ",\"order_desc\":%s,\"limit\":%" PRIu64 "}\n",
		p->order_desc ? "true" : "false", p->limit);
	return ferror(f) ? -EIO : 0;
}
