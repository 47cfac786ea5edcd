/* SPDX-License-Identifier: MIT */
/*
 * libcurl, loaded on first use (see common/lazy.h).  Include this instead
 * of <curl/curl.h>, call lazy_curl_load() once before any curl_* call, then
 * write curl_easy_init() etc. as usual: the names below map to function
 * pointers declared with __typeof__ of curl.h's own prototypes, so every
 * call is type-checked as before.  A curl_* function that is not listed
 * here fails to link (fay no longer links libcurl): add it to both lists.
 *
 * curl's typecheck-gcc.h wraps curl_easy_setopt/getinfo in macros that
 * cannot call through a pointer, so it is disabled here.
 */
#ifndef FAY_COMMON_LAZY_CURL_H
#define FAY_COMMON_LAZY_CURL_H

#ifdef CURLINC_CURL_H
#error "include common/lazy_curl.h instead of <curl/curl.h>"
#endif
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <stddef.h>

#define LAZY_CURL_SONAME  "libcurl.so.4"
#define LAZY_CURL_PACKAGE "libcurl4"

#define LAZY_CURL_FUNCS(X)						\
	X(curl_global_init) X(curl_global_cleanup)			\
	X(curl_easy_init) X(curl_easy_cleanup) X(curl_easy_reset)	\
	X(curl_easy_setopt) X(curl_easy_getinfo) X(curl_easy_perform)	\
	X(curl_easy_strerror) X(curl_slist_append) X(curl_slist_free_all)

#define LAZY_CURL_FIELD(f) __typeof__(f) *f;
struct lazy_curl {
	LAZY_CURL_FUNCS(LAZY_CURL_FIELD)
};
#undef LAZY_CURL_FIELD

/* Set by lazy_curl_load(); read only after it returned 0. */
extern struct lazy_curl lazy_curl_fn;

/*
 * Load libcurl and resolve lazy_curl_fn, once per process (thread-safe).
 * Returns 0, or -ELIBACC with err (when not NULL) naming the library, its
 * package and dlerror(); later calls give the same answer.
 */
int lazy_curl_load(char *err, size_t errlen);

#ifndef FAY_LAZY_CURL_IMPL
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_global_init        (*lazy_curl_fn.curl_global_init)
#define curl_global_cleanup     (*lazy_curl_fn.curl_global_cleanup)
#define curl_easy_init          (*lazy_curl_fn.curl_easy_init)
#define curl_easy_cleanup       (*lazy_curl_fn.curl_easy_cleanup)
#define curl_easy_reset         (*lazy_curl_fn.curl_easy_reset)
#define curl_easy_setopt(h, opt, arg) (*lazy_curl_fn.curl_easy_setopt)(h, opt, arg)
#define curl_easy_getinfo(h, info, arg) (*lazy_curl_fn.curl_easy_getinfo)(h, info, arg)
#define curl_easy_perform       (*lazy_curl_fn.curl_easy_perform)
#define curl_easy_strerror      (*lazy_curl_fn.curl_easy_strerror)
#define curl_slist_append       (*lazy_curl_fn.curl_slist_append)
#define curl_slist_free_all     (*lazy_curl_fn.curl_slist_free_all)
#endif

#endif
