// SPDX-License-Identifier: MIT
/*
 * Zipkin v2 routes beyond http.c's: autocomplete (zipkin-server's
 * ZipkinQueryApiV2 getAutocompleteKeys / getAutocompleteValues), which
 * Zipkin's UI, Lens, calls on every page load.
 *
 *   GET /api/v2/autocompleteKeys          the --autocomplete-keys, as given
 *   GET /api/v2/autocompleteValues?key=K  sorted values of the tags K seen
 *                                         (K configured; else [])
 */
#include <errno.h>
#include <string.h>

#include "collector/http_int.h"

enum MHD_Result api_autocomplete_keys(struct collector *c, struct MHD_Connection *con)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < c->nac_keys; i++) {
		if (json_array_append_new(a, json_string(c->ac_keys[i]))) {
			json_decref(a);
			a = NULL;
		}
	}
	return reply_json(c, con, a);
}

enum MHD_Result api_autocomplete_values(struct collector *c, struct MHD_Connection *con)
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
	return reply_json(c, con, a);
}
