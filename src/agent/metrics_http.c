// SPDX-License-Identifier: MIT
/*
 * The agent's Prometheus endpoint.  The agent writes its counters to
 * STATE-DIR/stats.json every --stats-interval (the same JSON it sends the
 * collector in STATS frames); a scrape reads that file and turns it into
 * the text format, so the endpoint needs no hook in the agent's loop and
 * never blocks it:
 *
 *   lost.REASON            fay_agent_records_lost_total{reason=REASON}
 *   processes.STATE        fay_agent_processes{state=STATE}
 *   probes[] {name, hits}  fay_agent_probe_hits_total{probe=NAME}
 *   any other number N.M   fay_agent_N_M_total (a counter) or
 *                          fay_agent_N_M (a gauge: is_gauge()), e.g.
 *                          keep mode's fay_agent_keep_held (events kept
 *                          now) and fay_agent_keep_overwritten_total
 *
 * every sample labelled with the agent's host and id, plus fay_agent_up and
 * fay_agent_stats_age_seconds (how old the file is).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/metrics_http.h"
#include "common/net.h"
#include "common/err.h"
#include "common/httpd.h"
#include "common/prom.h"

struct agent_metrics {
	struct httpd *d;
	char *stats_path;
	char addr[64];
};

static void name_part(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ? *s :
		      (*s >= 'A' && *s <= 'Z') ? *s - 'A' + 'a' : '_', f);
}

/* Whether the stats number at full (PREFIX_KEY, as in stats.json) is a
 * gauge (a level, a maximum, a size, a state) rather than a counter. */
static int is_gauge(const char *full, const char *key)
{
	static const char *const gauges[] = {
		"uptime_s", "rings", "spool_bytes", "spool_batches", "shipping_connected",
		"drain_queue_max", "drain_fast_tick", "flight_bytes", "flight_used",
		"flight_spans", "flight_oldest_ns", "containers_looked_into", "containers_shm_dirs",
		"keep_queries", "keep_bytes", "keep_held", "keep_oldest_ns",
	};
	size_t n = strlen(key);

	if (!strncmp(key, "max_", 4) || !strncmp(key, "last_", 5) ||
	    (n > 4 && !strcmp(key + n - 4, "_hwm")) || !strncmp(full, "containers_live_", 16))
		return 1;
	for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++)
		if (!strcmp(full, gauges[i]))
			return 1;
	return 0;
}

/* Generic numbers: fay_agent_PREFIX_KEY{labels} value, a gauge, or a
 * counter named fay_agent_PREFIX_KEY_total (as every fay counter is). */
static void flat(FILE *f, json_t *o, const char *prefix, const char *labels)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		if (!prefix[0] && (!strcmp(k, "lost") || !strcmp(k, "processes") ||
				   !strcmp(k, "probes")))
			continue;
		if (json_is_object(v)) {
			char p[128];

			snprintf(p, sizeof(p), "%s%s_", prefix, k);
			flat(f, v, p, labels);
		} else if (json_is_number(v) || json_is_boolean(v)) {
			char full[192];
			int gauge;

			snprintf(full, sizeof(full), "%s%s", prefix, k);
			gauge = is_gauge(full, k);
			fputs("# TYPE fay_agent_", f);
			name_part(f, full);
			fputs(gauge ? " gauge\nfay_agent_" : "_total counter\nfay_agent_", f);
			name_part(f, full);
			fprintf(f, "%s{%s} %.17g\n", gauge ? "" : "_total", labels,
				json_is_boolean(v) ? (double)json_is_true(v) : json_number_value(v));
		}
	}
}

char *agent_metrics_text(const char *stats_json, double age_s)
{
	json_t *st = stats_json ? json_loads(stats_json, 0, NULL) : NULL, *v, *p;
	char *buf = NULL, labels[512] = "";
	size_t len = 0, i;
	const char *k;
	FILE *f = open_memstream(&buf, &len), *lf;

	if (!f) {
		json_decref(st);
		return NULL;
	}
	if (st) {
		char *lb = NULL;
		size_t lblen = 0;

		lf = open_memstream(&lb, &lblen);
		if (lf) {
			fputs("host=\"", lf);
			prom_label(lf, json_string_value(json_object_get(st, "host")));
			fputs("\",agent=\"", lf);
			prom_label(lf, json_string_value(json_object_get(st, "agent_id")));
			fputs("\"", lf);
			fclose(lf);
			snprintf(labels, sizeof(labels), "%s", lb ? lb : "");
			free(lb);
		}
	}
	prom_family(f, "fay_agent_up", "gauge", "1 while the agent answers.");
	fprintf(f, "fay_agent_up{%s} 1\n", labels);
	prom_family(f, "fay_agent_stats_age_seconds", "gauge",
		    "Age of the counters below (--stats-interval).");
	fprintf(f, "fay_agent_stats_age_seconds{%s} %.3f\n", labels, st ? age_s : -1.0);
	if (st) {
		prom_family(f, "fay_agent_records_lost_total", "counter",
			    "Span records lost on this host, by reason.");
		json_object_foreach(json_object_get(st, "lost"), k, v) {
			fprintf(f, "fay_agent_records_lost_total{%s,reason=\"", labels);
			prom_label(f, k);
			fprintf(f, "\"} %" JSON_INTEGER_FORMAT "\n", json_integer_value(v));
		}
		prom_family(f, "fay_agent_processes", "gauge", "Traced processes.");
		json_object_foreach(json_object_get(st, "processes"), k, v) {
			fprintf(f, "fay_agent_processes{%s,state=\"", labels);
			prom_label(f, k);
			fprintf(f, "\"} %" JSON_INTEGER_FORMAT "\n", json_integer_value(v));
		}
		prom_family(f, "fay_agent_probe_hits_total", "counter",
			    "Events seen by each attached probe.");
		json_array_foreach(json_object_get(st, "probes"), i, p) {
			const char *name = json_string_value(json_object_get(p, "name"));

			if (!name)
				continue;
			fprintf(f, "fay_agent_probe_hits_total{%s,probe=\"", labels);
			prom_label(f, name);
			fprintf(f, "\"} %" JSON_INTEGER_FORMAT "\n",
				json_integer_value(json_object_get(p, "hits")));
		}
		flat(f, st, "", labels);
	}
	json_decref(st);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* The file's bytes (malloc'ed, NUL-terminated), NULL if absent. */
static char *slurp(const char *path, double *age_s)
{
	struct stat sb;
	char *s = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f = fopen(path, "re");

	if (!f)
		return NULL;
	if (!fstat(fileno(f), &sb))
		*age_s = difftime(time(NULL), sb.st_mtime);
	n = getdelim(&s, &cap, '\0', f);
	fclose(f);
	if (n < 0) {
		free(s);
		return NULL;
	}
	return s;
}

static int answer(struct http_resp *r, struct http_con *con, unsigned status,
		  const char *type)
{
	http_resp_header(r, "Content-Type", type);
	return http_resp_queue(con, status, r);
}

static int on_request(void *cls, struct http_con *con, const char *url, const char *method,
		      const char *upload, size_t *upload_size, void **con_cls)
{
	struct agent_metrics *m = cls;
	static const char notfound[] = "only GET /metrics here\n";
	double age = 0;
	char *stats, *text;

	if (strcmp(url, "/metrics") || (strcmp(method, "GET") && strcmp(method, "HEAD")))
		return answer(http_resp_buf((void *)notfound, sizeof(notfound) - 1, 0),
			      con, strcmp(url, "/metrics") ? 404 : 405, "text/plain");
	stats = slurp(m->stats_path, &age);
	text = agent_metrics_text(stats, age);
	free(stats);
	if (!text)
		return HTTPD_NO;
	return answer(http_resp_buf(text, strlen(text), 1),
		      con, 200, "text/plain; version=0.0.4; charset=utf-8");
}

struct agent_metrics *agent_metrics_start(const char *addr, const char *stats_path,
					  char *err, size_t errlen)
{
	struct agent_metrics *m = calloc(1, sizeof(*m));
	struct sockaddr_storage actual;
	char why[320];
	int fd, ret;

	if (!m || !(m->stats_path = strdup(stats_path))) {
		free(m);
		snprintf(err, errlen, "out of memory");
		return fay_err_ptr(-ENOMEM);
	}
	ret = httpd_load(why, sizeof(why));
	if (ret) {
		snprintf(err, errlen, "%s: %s", addr, why);
		goto fail;
	}
	fd = net_listen(addr, 16, &actual, err, errlen);
	if (fd < 0) {
		ret = fd;
		goto fail;
	}
	net_addr_str((struct sockaddr *)&actual, m->addr, sizeof(m->addr));
	m->d = httpd_start(&(struct httpd_opts){ .fd = fd, .max_conns = 16, .idle_s = 10,
						 .on_request = on_request, .cls = m },
			   why, sizeof(why));
	if (!m->d) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", addr, why);
		goto fail;
	}
	return m;
fail:
	free(m->stats_path);
	free(m);
	return fay_err_ptr(ret);
}

void agent_metrics_stop(struct agent_metrics *m)
{
	if (!m)
		return;
	httpd_stop(m->d);
	free(m->stats_path);
	free(m);
}

const char *agent_metrics_addr(const struct agent_metrics *m)
{
	return m->addr;
}
