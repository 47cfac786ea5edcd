// SPDX-License-Identifier: MIT
/*
 * Zipkin v2 routes beyond http.c's: autocomplete (zipkin-server's
 * ZipkinQueryApiV2 getAutocompleteKeys / getAutocompleteValues), which
 * Zipkin's UI, Lens, calls on every page load.
 *
 *   GET /api/v2/autocompleteKeys          the --autocomplete-keys, as given
 *   GET /api/v2/autocompleteValues?key=K  sorted values of the tags K seen
 *                                         (K configured; else [])
 *
 * with Zipkin's Cache-Control: keys always, values once there are more
 * than 3 (zipkin-server's ITZipkinServerAutocomplete).
 */
#include <errno.h>
#include <string.h>

#include "collector/http_int.h"

/* zipkin-server's cache policy for autocomplete answers. */
#define AC_CACHE "max-age=300, must-revalidate"

/* Answer 200 with the array a (taken), cached when cache. */
static int reply_list(struct collector *c, struct http_con *con,
		      json_t *a, int cache)
{
	char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;

	json_decref(a);
	if (!s)
		return reply_text(c, con, 500, "out of memory\n");
	return reply_hdr(con, 200, "application/json", s, strlen(s),
			 cache ? "Cache-Control" : NULL, AC_CACHE);
}

int api_autocomplete_keys(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < c->nac_keys; i++) {
		if (json_array_append_new(a, json_string(c->ac_keys[i]))) {
			json_decref(a);
			a = NULL;
		}
	}
	return reply_list(c, con, a, 1);
}

int api_autocomplete_values(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	const char *key = arg(con, "key");
	struct store_names n = { 0 };
	struct store_reader *r;
	json_t *a;
	int ret;

	size_t k;

	if (!key || !*key)
		return reply_text(c, con, 400, "key: required (GET /api/v2/autocompleteValues?key=K)\n");
	for (k = 0; k < c->nac_keys && strcmp(c->ac_keys[k], key); k++)
		;
	if (k == c->nac_keys)
		return reply_json(c, con, json_array()); /* not a configured key */
	r = coll_reader_get(c);
	if (!r)
		return reply_store_err(c, con, -errno);
	ret = store__autocomplete_values(r, key, &n);
	coll_reader_put(c, r);
	if (ret) {
		store_names_free(&n);
		return reply_store_err(c, con, ret);
	}
	a = json_array();
	for (size_t i = 0; a && i < n.n; i++) {
		if (json_array_append_new(a, json_stringn(n.v[i].p, n.v[i].len))) {
			json_decref(a);
			a = NULL;
		}
	}
	store_names_free(&n);
	/* as Zipkin: cached once there are more than 3 values (a list
	 * that is still filling up is asked again) */
	return reply_list(c, con, a, json_array_size(a) > 3);
}
