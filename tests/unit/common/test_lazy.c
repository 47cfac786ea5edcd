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
#include "common/lazy_mhd.h"
#include "test.h"

static void *slot_a, *slot_b;

static enum MHD_Result no_answer(void *cls, struct MHD_Connection *con, const char *url,
				 const char *method, const char *version,
				 const char *data, size_t *size, void **con_cls)
{
	return MHD_NO;
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
	char err[400] = "";
	struct MHD_Daemon *d;
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

	is_int(lazy_mhd_load(err, sizeof(err)), 0, "libmicrohttpd loads: %s", err);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, no_answer, NULL,
			     MHD_OPTION_END);
	ok(d, "MHD_start_daemon through the pointer (an ephemeral port)");
	if (d)
		MHD_stop_daemon(d);
	return test_done();
}
