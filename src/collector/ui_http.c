// SPDX-License-Identifier: MIT
/*
 * The web UI's files, from the table tools/ui-embed generated at build
 * time (ui_assets.h).  The UI is one page: every page path (/, /traces,
 * /trace/ID, /dependencies, /dashboard, /query, /hosts, /queries,
 * /queries/NAME, /captures) answers
 * index.html and the page's script draws what the path names, so a trace
 * has a stable URL that can be linked, bookmarked and reloaded.
 *
 * Each file has a strong ETag (If-None-Match -> 304) and, when it pays, a
 * gzip copy for clients that accept it.  The page itself is not cached
 * (no-cache: revalidated by ETag); the scripts and styles are versioned by
 * their ETag only, so they are revalidated too.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collector/ext_http.h"
#include "collector/http_int.h"
#include "collector/ui_assets.h"

/* Paths that are pages of the UI (answered with index.html). */
static int is_page(const char *url)
{
	static const char *const pages[] = {
		"/", "/index.html", "/traces", "/dependencies", "/dashboard", "/query",
		"/hosts", "/queries", "/captures",
	};

	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		if (!strcmp(url, pages[i]))
			return 1;
	if (!strncmp(url, "/queries/", 9))	/* a standing query's page */
		return url[9] && strspn(url + 9, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
					"abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(url + 9);
	return !strncmp(url, "/trace/", 7) && url[7] && !strchr(url + 7, '/');
}

static const struct ui_asset *find(const char *path)
{
	for (const struct ui_asset *a = ui_assets; a->path; a++)
		if (!strcmp(a->path, path))
			return a;
	return NULL;
}

/* Does the Accept-Encoding header accept gzip (and not with q=0)? */
static int accepts_gzip(struct http_con *con)
{
	const char *h = http_header(con, "Accept-Encoding");
	const char *g = h ? strcasestr(h, "gzip") : NULL;

	if (!g)
		return 0;
	g += 4;
	while (*g == ' ')
		g++;
	if (*g++ != ';')
		return 1;
	while (*g == ' ')
		g++;
	return strncmp(g, "q=", 2) || strtod(g + 2, NULL) > 0;
}

static int send_asset(struct http_con *con, const struct ui_asset *a)
{
	const char *inm = http_header(con, "If-None-Match");
	int gz = a->gz && accepts_gzip(con), not_modified;
	struct http_resp *r;

	not_modified = inm && (strstr(inm, a->etag) || !strcmp(inm, "*"));
	if (not_modified)
		r = http_resp_buf((void *)"", 0, 0);
	else
		r = http_resp_buf((void *)(gz ? a->gz : a->data), gz ? a->gzlen : a->len, 0);
	if (!r)
		return HTTPD_NO;
	http_resp_header(r, "ETag", a->etag);
	http_resp_header(r, "Cache-Control", "no-cache");
	http_resp_header(r, "X-Content-Type-Options", "nosniff");
	if (a->gz)
		http_resp_header(r, "Vary", "Accept-Encoding");
	if (!not_modified) {
		http_resp_header(r, "Content-Type", a->type);
		if (gz)
			http_resp_header(r, "Content-Encoding", "gzip");
	}
	return http_resp_queue(con, not_modified ? 304 : 200, r);
}

int ui_serve(struct collector *c, struct http_con *con, const struct http_rq *rq)
{
	const char *url = rq->url;
	const struct ui_asset *a;

	if (is_page(url)) {
		a = find("/index.html");
		if (!a)
			return reply_text(c, con, 500,
					  "this fay was built without its UI (ui/index.html)\n");
	} else if (!strncmp(url, "/ui/", 4)) {
		a = find(url);
		if (!a)
			return reply_text(c, con, 404, "no such UI file: %s\n", url);
	} else {
		return reply_text(c, con, 404, "no such route: %s %s\n", rq->method, url);
	}
	M_ADD(c, ui_requests, 1);
	return send_asset(con, a);
}
