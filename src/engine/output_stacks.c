// SPDX-License-Identifier: MIT
/*
 * A result grouped by a stack as text for stacks' readers: folded lines
 * ("main;a;b 42", what flame graph tools read) and a call tree, the
 * stacks merged from their roots with each frame's inclusive number and
 * share:
 *
 *         n       %  stack
 *       800  100.0%  main
 *       800  100.0%  └─ A
 *       600   75.0%     ├─ B
 *       600   75.0%     │  └─ C
 *       200   25.0%     └─ D
 *       200   25.0%        └─ C
 *
 * A row's other key columns are its outermost frames in both (a tree
 * per comm, say); its number is the first integer aggregate column.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

int engine_folded_check(const struct plan *p, char *why, size_t len)
{
	int stack = -1, value = -1;

	for (int i = 0; i < p->ncols; i++) {
		const struct plan_col *c = &p->cols[i];

		if (c->stack_key >= 0 && stack < 0)
			stack = i;
		else if (c->type == VT_INT && c->e && c->e->op != PX_KEY && value < 0)
			value = i;
	}
	if (stack < 0 || value < 0) {
		snprintf(why, len, "--format folded and --format tree print a stack and a number "
			 "per row: the query needs a stack key as a column (group s by s.ustack "
			 "into g select { stack: g.key, n: g.count() })%s", stack < 0 ? "" :
			 " and an integer aggregate column");
		return -EINVAL;
	}
	return 0;
}

/* n bytes of s up to a NUL, non-printable ones as '?', ';' as ':' when
 * semi (a key's value made a frame: it must stay one). */
static void put_frame_bytes(FILE *f, const char *s, size_t n, bool semi)
{
	for (size_t j = 0; j < n && s[j]; j++) {
		unsigned char c = (unsigned char)s[j];

		fputc(semi && c == ';' ? ':' : c >= 0x20 && c != 0x7f ? c : '?', f);
	}
}

/* Row r of res folded into f (no newline): the other key columns as the
 * outermost frames, then the stack's frames; *n its number, *name the
 * number's column name. */
static void fold_row(const struct plan *p, const struct engine_row *row, FILE *f, int64_t *n,
		     const char **name)
{
	bool stacked = false, valued = false;

	*n = 0;
	for (int i = 0; i < p->ncols; i++) {
		const struct plan_col *c = &p->cols[i];
		struct plan_val v;

		if (c->type == VT_DIST || !c->e || plan_eval(p, c->e, row->key, row->val, &v))
			continue;
		if (c->stack_key >= 0 && !stacked) {
			put_frame_bytes(f, v.s, v.len, false);
			stacked = true;
		} else if (c->e->op != PX_KEY && v.type == VT_INT && !valued) {
			*n = v.i;
			*name = c->name;
			valued = true;
		} else if (c->e->op == PX_KEY && !stacked && v.type == VT_STR) {
			put_frame_bytes(f, v.s, v.len, true);
			fputc(';', f);
		} else if (c->e->op == PX_KEY && !stacked) {
			fprintf(f, "%" PRId64 ";", v.i);
		}
	}
}

int engine_print_folded(const struct plan *p, FILE *f, const struct engine_result *res)
{
	char why[256];
	const char *name = "";

	if (engine_folded_check(p, why, sizeof(why)))
		return -EINVAL;
	for (size_t r = 0; r < res->nrows; r++) {
		int64_t n;

		fold_row(p, &res->rows[r], f, &n, &name);
		fprintf(f, " %" PRId64 "\n", n);
	}
	return ferror(f) ? -EIO : 0;
}

/* ---- the call tree ------------------------------------------------------------- */

struct tnode {
	char *name;
	int64_t n;		/* inclusive: the rows through this frame */
	struct tnode *kids;
	size_t nkids, cap;
};

/* The child of t named s[0, len) (made when absent), or NULL on ENOMEM. */
static struct tnode *kid(struct tnode *t, const char *s, size_t len)
{
	struct tnode *k;

	for (size_t i = 0; i < t->nkids; i++)
		if (strlen(t->kids[i].name) == len && !memcmp(t->kids[i].name, s, len))
			return &t->kids[i];
	if (t->nkids == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4;

		k = realloc(t->kids, cap * sizeof(*k));
		if (!k)
			return NULL;
		t->kids = k;
		t->cap = cap;
	}
	k = &t->kids[t->nkids];
	*k = (struct tnode){ .name = strndup(s, len) };
	if (!k->name)
		return NULL;
	t->nkids++;
	return k;
}

/* Add the folded stack s (root first, ';' between frames) counting n. */
static int add_stack(struct tnode *root, const char *s, int64_t n)
{
	struct tnode *t = root;

	root->n += n;
	while (*s) {
		const char *e = strchr(s, ';');
		size_t len = e ? (size_t)(e - s) : strlen(s);

		t = kid(t, s, len);
		if (!t)
			return -ENOMEM;
		t->n += n;
		s += len + (e != NULL);
	}
	return 0;
}

static int by_n(const void *a, const void *b)
{
	const struct tnode *x = a, *y = b;

	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* t's children, each a line and its own children under it; prefix is
 * the drawing of the levels above (grows by 3 columns a level). */
static void put_kids(FILE *f, const struct tnode *t, int64_t total, char *prefix, size_t plen,
		     size_t cap, bool top)
{
	qsort(t->kids, t->nkids, sizeof(*t->kids), by_n);
	for (size_t i = 0; i < t->nkids; i++) {
		const struct tnode *k = &t->kids[i];
		bool last = i + 1 == t->nkids;
		size_t more = top ? 0 : strlen(last ? "   " : "│  ");

		fprintf(f, "%10" PRId64 " %6.1f%%  %.*s%s%s\n", k->n,
			total ? 100.0 * (double)k->n / (double)total : 0.0, (int)plen, prefix,
			top ? "" : last ? "└─ " : "├─ ", k->name);
		if (plen + more + 1 < cap) {
			memcpy(prefix + plen, top ? "" : last ? "   " : "│  ", more);
			put_kids(f, k, total, prefix, plen + more, cap, false);
		} else if (k->nkids) {
			fprintf(f, "%10s %7s  %.*s   [deeper frames cut]\n", "", "", (int)plen,
				prefix);
		}
	}
}

static void tree_free(struct tnode *t)
{
	for (size_t i = 0; i < t->nkids; i++)
		tree_free(&t->kids[i]);
	free(t->kids);
	free(t->name);
}

int engine_print_tree(const struct plan *p, FILE *f, const struct engine_result *res)
{
	struct tnode root = { 0 };
	char why[256], *line = NULL, prefix[4096];
	const char *name = "n";
	size_t len = 0;
	int err = 0;

	if (engine_folded_check(p, why, sizeof(why)))
		return -EINVAL;
	for (size_t r = 0; r < res->nrows && !err; r++) {
		FILE *m = open_memstream(&line, &len);
		int64_t n;

		if (!m) {
			err = -ENOMEM;
			break;
		}
		fold_row(p, &res->rows[r], m, &n, &name);
		if (fclose(m))
			err = -ENOMEM;
		else
			err = add_stack(&root, line, n);
		free(line);
		line = NULL;
	}
	if (!err) {
		fprintf(f, "%10.10s %7s  %s\n", name, "%", "stack");
		put_kids(f, &root, root.n, prefix, 0, sizeof(prefix), true);
	}
	tree_free(&root);
	return err ? err : ferror(f) ? -EIO : 0;
}
