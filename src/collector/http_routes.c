// SPDX-License-Identifier: MIT
/*
 * Every route of the collector's HTTP server, in one table: its methods,
 * its path, the scope a token needs for it (src/collector/README.md,
 * "Security"), its handler.  http.c looks the route up on the headers, so
 * a request is refused (404, 405, 401, 403) before a byte of its body is
 * read, and the policy holds for every route alike.
 *
 * Scopes: read (the query API, the UI's API, /api/sql, /metrics), write
 * (ingest, the thresholds), probe (/api/query and standing queries: they
 * load BPF programs on this host or on the agents).  /health and the UI's
 * files (no data in them) are open.
 */
#include <stdio.h>
#include <string.h>

#include "collector/http_int.h"

/* ---- the table -------------------------------------------------------------- */

#define R  COLL_SCOPE_READ
#define W  COLL_SCOPE_WRITE
#define P  COLL_SCOPE_PROBE

static const struct http_route routes[] = {
	/* Zipkin v2 */
	{ "GET",    "/api/v2/spans",              0, R, http_zipkin_names },
	{ "POST",   "/api/v2/spans",              0, W, http_zipkin_post },
	{ "GET",    "/api/v2/services",           0, R, http_zipkin_names },
	{ "GET",    "/api/v2/remoteServices",     0, R, http_zipkin_names },
	{ "GET",    "/api/v2/traces",             0, R, http_zipkin_traces },
	{ "GET",    "/api/v2/traceMany",          0, R, http_zipkin_trace_many },
	{ "GET",    "/api/v2/trace/",             1, R, http_zipkin_trace },
	{ "GET",    "/api/v2/dependencies",       0, R, api_dependencies },
	{ "GET",    "/api/v2/autocompleteKeys",   0, R, api_autocomplete_keys },
	{ "GET",    "/api/v2/autocompleteValues", 0, R, api_autocomplete_values },
	/* operations */
	{ "GET",    "/health",                    0, HTTP_OPEN, http_health },
	{ "GET",    "/metrics",                   0, R, http_metrics },
	/* the UI's API */
	{ "GET",    "/api/ui/dashboard",          0, R, api_dashboard },
	{ "GET",    "/api/ui/thresholds",         0, R, api_thresholds },
	{ "PUT",    "/api/ui/thresholds",         0, W, api_thresholds },
	{ "GET",    "/api/ui/hosts",              0, R, api_hosts },
	{ "GET",    "/api/cluster/peers",         0, R, api_cluster_peers },
	/* standing queries (api_standing.c) */
	{ "GET",    "/api/queries",               0, R, api_standing },
	{ "POST",   "/api/queries",               0, P, api_standing },
	{ "GET",    "/api/queries/",              1, R, api_standing },
	{ "DELETE", "/api/queries/",              1, P, api_standing },
	/* the flight recorder (api_capture.c) */
	{ "GET",    "/api/captures",              0, R, api_captures },
	{ "POST",   "/api/captures",              0, W, api_captures },
	{ "GET",    "/api/captures/rules",        0, R, api_capture_rules },
	{ "POST",   "/api/captures/rules",        0, P, api_capture_rules },
	{ "DELETE", "/api/captures/rules/",       1, P, api_capture_rules },
	{ "GET",    "/api/captures/",             1, R, capture_query_events },
	/* SQL (read-only) and FayQL */
	{ "POST",   "/api/sql",                   0, R, api_sql },
	{ "POST",   "/api/query",                 0, P, api_query },
	/* OTLP/HTTP ingest */
	{ "POST",   "/v1/traces",                 0, W, api_otlp },
};

/* The OTLP/HTTP listener (--otlp-http): this route alone. */
static const struct http_route otlp_route = { "POST", "/v1/traces", 0, W, api_otlp };
/* Every GET no route above takes. */
static const struct http_route ui_route = { "GET", "/", 1, HTTP_OPEN, ui_serve };

#undef R
#undef W
#undef P

static int path_is(const struct http_route *r, const char *url)
{
	size_t n = strlen(r->path);

	return r->prefix ? !strncmp(url, r->path, n) : !strcmp(url, r->path);
}

/* Is method one of r's ("GET" answers HEAD too)? */
static int method_is(const struct http_route *r, const char *method)
{
	if (!strcmp(method, "HEAD"))
		method = "GET";
	return !strcmp(r->methods, method);
}

/* Append r's methods to allow ("GET, HEAD, PUT"). */
static void allow_add(char *allow, size_t len, const struct http_route *r)
{
	size_t n = strlen(allow);

	snprintf(allow + n, len - n, "%s%s%s", n ? ", " : "", r->methods,
		 !strcmp(r->methods, "GET") ? ", HEAD" : "");
}

/* Contract in http_int.h. */
const struct http_route *http_route_find(const char *url, const char *method, int otlp_only,
					 unsigned *status, char *msg, size_t msglen,
					 char *allow, size_t allowlen)
{
	int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	int known = 0;

	allow[0] = '\0';
	if (otlp_only) {
		if (!path_is(&otlp_route, url)) {
			*status = 404;
			snprintf(msg, msglen, "no such route: %s %s (this is the OTLP/HTTP listener, "
				 "--otlp-http: POST /v1/traces only)\n", method, url);
			return NULL;
		}
		if (method_is(&otlp_route, method))
			return &otlp_route;
		allow_add(allow, allowlen, &otlp_route);
		known = 1;
	} else {
		for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
			if (!path_is(&routes[i], url))
				continue;
			if (method_is(&routes[i], method))
				return &routes[i];
			allow_add(allow, allowlen, &routes[i]);
			known = 1;
		}
	}
	if (!known && get)
		return &ui_route;
	*status = known ? 405 : 404;
	if (known)
		snprintf(msg, msglen, "%s is not allowed on %s (allowed: %s)\n", method, url,
			 allow);
	else
		snprintf(msg, msglen, "no such route: %s %s\n", method, url);
	return NULL;
}
