// SPDX-License-Identifier: MIT
/*
 * Standing cluster queries over HTTP (standing.h):
 *
 *   GET    /api/queries                  every standing query, with its
 *                                        latest window
 *   POST   /api/queries                  {"name": N, "query": Q, "grace_ms": G}
 *                                        201; 400 with the line:col
 *                                        diagnostic; 409 when N exists
 *   DELETE /api/queries/NAME             stop it (its agents detach)
 *   GET    /api/queries/NAME/results?limit=N&trace=ID
 *                                        its history: the last N windows
 *                                        (default 100), oldest first;
 *                                        with trace (a trace id in hex),
 *                                        only the rows of that trace (a
 *                                        profile query grouped by
 *                                        s.trace_id: the trace page)
 *
 * POST and DELETE need the token when the collector has one.
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/standing.h"
#include "collector/http_int.h"
#include "common/spanrec.h"

static int add(struct collector *c, struct http_con *con,
	       const struct http_body *body)
{
	json_error_t je;
	json_t *j = json_loadb(body->p ? body->p : "", body->len, 0, &je);
	const char *name = json_string_value(json_object_get(j, "name"));
	const char *text = json_string_value(json_object_get(j, "query"));
	json_t *g = json_object_get(j, "grace_ms");
	char err[2048];
	int ret, line = 0, col = 0;
	int res;

	if (!j || !name || !text || (g && !json_is_integer(g))) {
		json_decref(j);
		return reply_json_status(c, con, 400, json_pack("{s:s}", "error",
			"body: expected {\"name\": \"NAME\", \"query\": \"from ...\", \"grace_ms\": N}"));
	}
	ret = standing_add(c->standing, name, text,
			   g && json_integer_value(g) > 0 ? (uint64_t)json_integer_value(g) * 1000000ull : 0,
			   err, sizeof(err), &line, &col);
	if (!ret)
		res = reply_json_status(c, con, 201, json_pack("{s:s, s:s}", "name", name,
			"results", "/api/queries/NAME/results"));
	else
		res = reply_json_status(c, con, ret == -EEXIST ? 409 : ret == -EINVAL ? 400 : 500,
			json_pack("{s:s, s:i, s:i}", "error", err, "line", line, "col", col));
	json_decref(j);
	return res;
}

int api_standing(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	/* what follows "/api/queries" */
	const char *rest = rq->url + 12, *method = rq->method;
	const struct http_body *body = &rq->body;
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	char name[STANDING_NAME_MAX + 2], *json = NULL;
	const char *slash;
	size_t n;
	int ret;

	if (!c->standing)
		return reply_text(c, con, 503, "standing queries are not available\n");
	if (!*rest) {
		if (!get)
			return add(c, con, body);
		json = standing_list_json(c->standing);
		return json ? reply(con, 200, "application/json", json, strlen(json)) :
			      reply_text(c, con, 500, "out of memory\n");
	}
	rest++;				/* past the '/' */
	slash = strchr(rest, '/');
	n = slash ? (size_t)(slash - rest) : strlen(rest);
	if (!n || n > STANDING_NAME_MAX)
		return reply_text(c, con, 404, "no standing query here\n");
	memcpy(name, rest, n);
	name[n] = '\0';
	if (!slash && !strcmp(method, "DELETE")) {
		ret = standing_drop(c->standing, name);
		if (ret == -ENOENT)
			return reply_text(c, con, 404, "no standing query named %s\n", name);
		if (ret)
			return reply_text(c, con, 503, "the store cannot take the drop (the"
					  " collector's log says why)\n");
		return reply_json(c, con, json_pack("{s:s}", "dropped", name));
	}
	if (slash && !strcmp(slash, "/results") && get) {
		const char *l = http_arg(con, "limit");
		char *end;
		unsigned long limit = l ? strtoul(l, &end, 10) : 100;

		const char *t = http_arg(con, "trace");
		uint64_t hi, trace = 0;

		if (l && (*end || !*l || limit < 1 || limit > 100000))
			return reply_text(c, con, 400, "limit: an integer from 1 to 100000\n");
		if (t && spanrec_parse_trace(t, strlen(t), &hi, &trace))
			return reply_text(c, con, 400, "trace: a trace id, 16 or 32 hex digits\n");
		ret = standing_results(c->standing, name, (unsigned)limit, t ? &trace : NULL, &json);
		if (ret == -ENOENT)
			return reply_text(c, con, 404, "no standing query named %s\n", name);
		if (ret == -EINVAL)
			return reply_text(c, con, 400, "trace: the standing query %s does not group profile(...) samples by s.trace_id\n", name);
		return ret ? reply_text(c, con, ret == -ENOMEM ? 500 : 503,
					"%s\n", ret == -ENOMEM ? "out of memory" :
					"the store cannot answer (the collector's log says why)") :
			     reply(con, 200, "application/json", json, strlen(json));
	}
	return reply_text(c, con, 405, "%s is not allowed on /api/queries/%s\n", method, rest);
}
