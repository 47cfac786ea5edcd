// SPDX-License-Identifier: MIT
/*
 * Libraries loaded on first use (common/lazy*.h): libcurl and libmicrohttpd
 * resolve and work through the pointers; a missing library or symbol is an
 * error naming the library, its package and the loader's reason, and
 * leaves no slot set.
 */
#include <errno.h>

#include "common/lazy.h"
#include "common/lazy_curl.h"
#include "common/httpd.h"
#include "common/net.h"
#include "test.h"

static void *slot_a, *slot_b;

static int hello(void *cls, struct http_con *con, const char *url, const char *method,
		 const char *data, size_t *size, void **req)
{
	static char text[] = "hello\n";
	struct http_resp *r;

	if (!*req) {            /* the headers: keep a state, answer later */
		*req = cls;
		return HTTPD_YES;
	}
	r = http_resp_buf(text, sizeof(text) - 1, 0);
	http_resp_header(r, "X-Url", url);
	return http_resp_queue(con, 200, r);
}

static size_t sink(char *p, size_t sz, size_t n, void *cls)
{
	strncat(cls, p, sz * n < 60 ? sz * n : 60);
	return sz * n;
}

int main(void)
{
	struct lazy_sym syms[] = {
		{ "curl_easy_init", &slot_a },
		{ "fay_no_such_function", &slot_b },
	};
	struct lazy_lib nolib = {
		.soname = "libfay-no-such-lib.so.9", .package = "fay-nopkg",
		.syms = syms, .nsyms = 1,
	};
	struct lazy_lib nosym = {
		.soname = LAZY_CURL_SONAME, .package = LAZY_CURL_PACKAGE,
		.syms = syms, .nsyms = 2,
	};
	char err[400] = "", url[96], got[64] = "";
	struct sockaddr_storage ss;
	struct httpd *d;
	int fd;
	CURL *c;

	lazy_open(&nolib);
	is_int(lazy_result(&nolib, err, sizeof(err)), -ELIBACC, "missing library: -ELIBACC");
	ok(strstr(err, "libfay-no-such-lib.so.9") && strstr(err, "fay-nopkg") &&
	   strstr(err, "cannot open shared object"), "error names library, package, dlerror: %s", err);
	ok(!slot_a, "missing library: no slot set");

	lazy_open(&nosym);
	is_int(lazy_result(&nosym, err, sizeof(err)), -ELIBACC, "missing symbol: -ELIBACC");
	ok(strstr(err, "fay_no_such_function") && strstr(err, LAZY_CURL_SONAME),
	   "error names the symbol and library: %s", err);
	ok(!slot_a && !slot_b, "missing symbol: the resolved slots are cleared again");
	is_int(lazy_result(&nosym, NULL, 0), -ELIBACC, "NULL err buffer is fine");

	is_int(lazy_curl_load(err, sizeof(err)), 0, "libcurl loads: %s", err);
	is_int(lazy_curl_load(NULL, 0), 0, "second load: same answer");
	is_str(curl_easy_strerror(CURLE_COULDNT_CONNECT), "Couldn't connect to server",
	       "curl_easy_strerror through the pointer");
	c = curl_easy_init();
	ok(c, "curl_easy_init through the pointer");
	is_int(curl_easy_setopt(c, CURLOPT_URL, "http://127.0.0.1:9/"), CURLE_OK, "curl_easy_setopt");
	curl_easy_cleanup(c);

	is_int(httpd_load(err, sizeof(err)), 0, "libmicrohttpd loads: %s", err);
	fd = net_listen("127.0.0.1:0", 4, &ss, err, sizeof(err));
	ok(fd >= 0, "listen: %s", err);
	d = httpd_start(&(struct httpd_opts){ .fd = fd, .on_request = hello, .cls = &fd },
			err, sizeof(err));
	ok(d, "httpd_start through the pointers: %s", d ? "" : err);
	net_addr_str((struct sockaddr *)&ss, err, sizeof(err));
	snprintf(url, sizeof(url), "http://%s/x", err);
	c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, got);
	is_int(curl_easy_perform(c), CURLE_OK, "GET %s", url);
	is_str(got, "hello\n", "the handler's answer arrives");
	curl_easy_cleanup(c);
	httpd_stop(d);
	return test_done();
}
