/* SPDX-License-Identifier: MIT */
/*
 * `fay agent --metrics ADDR`: Prometheus text format of the agent's
 * counters at http://ADDR/metrics (metrics_http.c).
 */
#ifndef FAY_AGENT_METRICS_HTTP_H
#define FAY_AGENT_METRICS_HTTP_H

#include <stddef.h>

struct agent_metrics;

/*
 * Listen on addr (HOST:PORT, :PORT or PORT; loopback without a host) and
 * answer GET /metrics from stats_path, the JSON counters the agent
 * rewrites every --stats-interval (STATE-DIR/stats.json).  NULL + errno
 * with the reason in err.  Stop with agent_metrics_stop().
 */
struct agent_metrics *agent_metrics_start(const char *addr, const char *stats_path,
					  char *err, size_t errlen);
void agent_metrics_stop(struct agent_metrics *m);
/* The address it listens on ("127.0.0.1:9464"). */
const char *agent_metrics_addr(const struct agent_metrics *m);
/* The exposition of the stats JSON text (NULL: none yet), malloc'ed. */
char *agent_metrics_text(const char *stats_json, double age_s);

#endif
