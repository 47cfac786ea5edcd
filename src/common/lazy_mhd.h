/* SPDX-License-Identifier: MIT */
/*
 * libmicrohttpd, loaded on first use (see common/lazy.h).  Include this
 * instead of <microhttpd.h>, call lazy_mhd_load() before MHD_start_daemon()
 * (every other MHD_* call comes from a daemon's callbacks, so after it),
 * then write MHD_* calls as usual: the names below map to function
 * pointers declared with __typeof__ of microhttpd.h's own prototypes, so
 * every call is type-checked as before.  An MHD_* function that is not
 * listed here fails to link (fay no longer links libmicrohttpd): add it
 * to both lists.
 */
#ifndef FAY_COMMON_LAZY_MHD_H
#define FAY_COMMON_LAZY_MHD_H

#ifdef MHD_MICROHTTPD_H
#error "include common/lazy_mhd.h instead of <microhttpd.h>"
#endif
#include <microhttpd.h>
#include <stddef.h>

#define LAZY_MHD_SONAME  "libmicrohttpd.so.12"
#define LAZY_MHD_PACKAGE "libmicrohttpd12"

#define LAZY_MHD_FUNCS(X)						\
	X(MHD_start_daemon) X(MHD_stop_daemon)				\
	X(MHD_create_response_from_buffer)				\
	X(MHD_create_response_from_callback)				\
	X(MHD_add_response_header) X(MHD_queue_response)		\
	X(MHD_destroy_response) X(MHD_lookup_connection_value)		\
	X(MHD_get_connection_values) X(MHD_get_connection_info)

#define LAZY_MHD_FIELD(f) __typeof__(f) *f;
struct lazy_mhd {
	LAZY_MHD_FUNCS(LAZY_MHD_FIELD)
};
#undef LAZY_MHD_FIELD

/* Set by lazy_mhd_load(); read only after it returned 0. */
extern struct lazy_mhd lazy_mhd_fn;

/*
 * Load libmicrohttpd and resolve lazy_mhd_fn, once per process
 * (thread-safe).  Returns 0, or -ELIBACC with err (when not NULL) naming
 * the library, its package and dlerror(); later calls give the same answer.
 */
int lazy_mhd_load(char *err, size_t errlen);

#ifndef FAY_LAZY_MHD_IMPL
#define MHD_start_daemon                  (*lazy_mhd_fn.MHD_start_daemon)
#define MHD_stop_daemon                   (*lazy_mhd_fn.MHD_stop_daemon)
#define MHD_create_response_from_buffer   (*lazy_mhd_fn.MHD_create_response_from_buffer)
#define MHD_create_response_from_callback (*lazy_mhd_fn.MHD_create_response_from_callback)
#define MHD_add_response_header           (*lazy_mhd_fn.MHD_add_response_header)
#define MHD_queue_response                (*lazy_mhd_fn.MHD_queue_response)
#define MHD_destroy_response              (*lazy_mhd_fn.MHD_destroy_response)
#define MHD_lookup_connection_value       (*lazy_mhd_fn.MHD_lookup_connection_value)
#define MHD_get_connection_values         (*lazy_mhd_fn.MHD_get_connection_values)
#define MHD_get_connection_info           (*lazy_mhd_fn.MHD_get_connection_info)
#endif

#endif
