// SPDX-License-Identifier: MIT
/*
 * The dashboard's thresholds: BlkKin's monitoring view colours a cell red
 * when a layer's latency passes its limit.  Rules live in a JSON file
 * (--thresholds FILE, default DB.thresholds.json), are edited in the UI
 * through PUT /api/ui/thresholds, and each change is written back to the
 * file atomically (temporary file, fsync, rename).
 *
 *   {"rules": [
 *     {"service": "mapperd", "span": "*", "p99_us": 5000},
 *     {"service": "*", "span": "write", "p50_us": 800, "error_rate": 0.01}
 *   ]}
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/thresholds.h"
#include "common/err.h"
#include "common/file_atomic.h"

struct thresholds {
	pthread_mutex_t lock;
	char *path;
	json_t *doc;
};

static const char *const limit_keys[] = { "p50_us", "p99_us", "avg_us", "error_rate" };

int thresholds_check(const json_t *doc, char *err, size_t errlen)
{
	const json_t *rules, *r, *v;
	const char *k;
	size_t i;

	if (!json_is_object(doc)) {
		snprintf(err, errlen, "thresholds: expected a JSON object {\"rules\": [...]}");
		return -EINVAL;
	}
	json_object_foreach((json_t *)doc, k, v) {
		if (strcmp(k, "rules")) {
			snprintf(err, errlen, "thresholds: unknown key '%.40s' (only \"rules\")", k);
			return -EINVAL;
		}
	}
	rules = json_object_get(doc, "rules");
	if (!rules)
		return 0;
	if (!json_is_array(rules)) {
		snprintf(err, errlen, "rules: expected an array of rules");
		return -EINVAL;
	}
	json_array_foreach(rules, i, r) {
		if (!json_is_object(r)) {
			snprintf(err, errlen, "rules[%zu]: expected an object", i);
			return -EINVAL;
		}
		json_object_foreach((json_t *)r, k, v) {
			size_t j;

			if (!strcmp(k, "service") || !strcmp(k, "span")) {
				if (!json_is_string(v) || !json_string_length(v)) {
					snprintf(err, errlen, "rules[%zu].%s: expected a name or \"*\"", i, k);
					return -EINVAL;
				}
				continue;
			}
			for (j = 0; j < ARRAY_SIZE(limit_keys); j++)
				if (!strcmp(k, limit_keys[j]))
					break;
			if (j == ARRAY_SIZE(limit_keys)) {
				snprintf(err, errlen, "rules[%zu]: unknown key '%.40s' (service, span, p50_us, p99_us, avg_us, error_rate)",
					 i, k);
				return -EINVAL;
			}
			if (json_is_null(v))
				continue;
			if (!json_is_number(v) || json_number_value(v) < 0 ||
			    (j == 3 && json_number_value(v) > 1)) {
				snprintf(err, errlen, "rules[%zu].%s: expected %s", i, k,
					 j == 3 ? "a fraction between 0 and 1" :
						  "a non-negative number of microseconds");
				return -EINVAL;
			}
		}
	}
	return 0;
}

struct thresholds *thresholds_new(const char *path, char *err, size_t errlen)
{
	struct thresholds *t = calloc(1, sizeof(*t));
	json_error_t je;
	char why[256];

	if (!t || !(t->path = strdup(path))) {
		free(t);
		snprintf(err, errlen, "out of memory");
		return fay_err_ptr(-ENOMEM);
	}
	pthread_mutex_init(&t->lock, NULL);
	if (access(path, F_OK) && errno == ENOENT) {
		t->doc = json_pack("{s:[]}", "rules");
		if (!t->doc)
			goto oom;
		return t;
	}
	t->doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!t->doc) {
		snprintf(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, je.text);
		goto bad;
	}
	if (thresholds_check(t->doc, why, sizeof(why))) {
		snprintf(err, errlen, "%s: %s", path, why);
		goto bad;
	}
	if (!json_object_get(t->doc, "rules"))
		json_object_set_new(t->doc, "rules", json_array());
	return t;
oom:
	snprintf(err, errlen, "out of memory");
	thresholds_free(t);
	return fay_err_ptr(-ENOMEM);
bad:
	thresholds_free(t);
	return fay_err_ptr(-EINVAL);
}

void thresholds_free(struct thresholds *t)
{
	if (!t)
		return;
	json_decref(t->doc);
	pthread_mutex_destroy(&t->lock);
	free(t->path);
	free(t);
}

const char *thresholds_path(const struct thresholds *t)
{
	return t->path;
}

int thresholds_set(struct thresholds *t, json_t *doc, char *err, size_t errlen)
{
	char *s;
	int ret;

	ret = thresholds_check(doc, err, errlen);
	if (ret)
		return ret;
	s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_lock(&t->lock);
	ret = file_write_atomic(t->path, s, strlen(s), 0644, 0);
	if (!ret) {
		json_decref(t->doc);
		t->doc = json_deep_copy(doc);
		if (!json_object_get(t->doc, "rules"))
			json_object_set_new(t->doc, "rules", json_array());
	} else {
		snprintf(err, errlen, "cannot write %s: %s", t->path, strerror(-ret));
	}
	pthread_mutex_unlock(&t->lock);
	free(s);
	return ret;
}

json_t *thresholds_get(struct thresholds *t)
{
	json_t *j;

	pthread_mutex_lock(&t->lock);
	j = json_deep_copy(t->doc);
	pthread_mutex_unlock(&t->lock);
	return j;
}

/* 0: r does not apply; else its specificity (1 neither .. 4 both). */
static int rule_rank(const json_t *r, const char *service, const char *span)
{
	const char *rs = json_string_value(json_object_get(r, "service"));
	const char *rn = json_string_value(json_object_get(r, "span"));
	int svc_any = !rs || !strcmp(rs, "*"), span_any = !rn || !strcmp(rn, "*");

	if ((!svc_any && strcasecmp(rs, service)) || (!span_any && strcasecmp(rn, span)))
		return 0;
	return 1 + (!svc_any ? 2 : 0) + (!span_any ? 1 : 0);
}

void thresholds_match(const json_t *doc, const char *service, const char *span,
		      struct th_limits *out)
{
	double *f[] = { &out->p50_us, &out->p99_us, &out->avg_us, &out->error_rate };
	int best[ARRAY_SIZE(limit_keys)] = { 0 };
	const json_t *r;
	size_t i;

	for (size_t k = 0; k < ARRAY_SIZE(f); k++)
		*f[k] = -1;
	json_array_foreach(json_object_get(doc, "rules"), i, r) {
		int rank = rule_rank(r, service, span);

		if (!rank)
			continue;
		for (size_t k = 0; k < ARRAY_SIZE(limit_keys); k++) {
			json_t *v = json_object_get(r, limit_keys[k]);

			/* later rules of the same rank win, as in a config file */
			if (json_is_number(v) && rank >= best[k]) {
				best[k] = rank;
				*f[k] = json_number_value(v);
			}
		}
	}
}
