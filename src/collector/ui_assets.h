/* SPDX-License-Identifier: MIT */
/*
 * The web UI's files, embedded in the binary at build time: the HTML, CSS
 * and JS of ui/ and uPlot (from ui/node_modules) are turned into
 * byte arrays by tools/ui-embed (mk/ui.mk); src/collector/ui_http.c serves
 * them.  Nothing is read from disk or downloaded at run time.
 */
#ifndef FAY_COLLECTOR_UI_ASSETS_H
#define FAY_COLLECTOR_UI_ASSETS_H

#include <stddef.h>

struct ui_asset {
	const char *path;               /* URL path: "/ui/app.js"; NULL ends */
	const char *type;               /* Content-Type */
	const unsigned char *data;
	size_t len;
	const unsigned char *gz;        /* gzip copy, NULL when not smaller */
	size_t gzlen;
	const char *etag;               /* strong ETag, quoted */
};

/* The table, ended by an entry with path NULL (generated). */
extern const struct ui_asset ui_assets[];

#endif
