// SPDX-License-Identifier: MIT
/* Instantiates the LTTng-UST probes of bench_span_lttng.h (one TU). */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "bench_span_lttng.h"
