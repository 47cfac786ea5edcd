// SPDX-License-Identifier: MIT
/*
 * fay capture: bring back from every agent's flight buffer the spans of
 * one trace id, or of the last N seconds, and store them on the
 * collector (POST /api/captures); or the events a standing query in keep
 * mode kept on every host, printed by --show ID; register or drop a capture rule (POST
 * /api/captures/rules, DELETE /api/captures/rules/NAME); or list the
 * captures made and the rules (GET /api/captures).
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "cli/traces.h"
#include "common/clock.h"

static void usage(FILE *f)
{
	fputs(
"NAME\n"
"    fay capture - bring back spans kept on the hosts (the flight recorder)\n"
"\n"
"SYNOPSIS\n"
"    fay capture --cluster URL --trace ID\n"
"    fay capture --cluster URL --last DUR [--host H] [--service S]\n"
"    fay capture --cluster URL --query NAME --last DUR [--host H]\n"
"    fay capture --cluster URL --show ID\n"
"    fay capture --cluster URL --when EXPR [--name NAME] [--per-second N]\n"
"                [--settle DUR] [--follow DUR] [--with-query NAME --last DUR]\n"
"    fay capture --cluster URL --drop NAME\n"
"    fay capture --cluster URL --list\n"
"    (each with [--json] [--token T | --token-file FILE] [--tls-ca FILE]\n"
"     [--tls-cert FILE --tls-key FILE])\n"
"\n"
"DESCRIPTION\n"
"    Head sampling (FAY_SAMPLE) decides at a trace's root whether its spans\n"
"    are shipped.  A process started with FAY_RECORD=all records the others\n"
"    too, marked unsampled, and an agent started with --flight SIZE keeps\n"
"    them on its host, in memory, the oldest going first when SIZE is full.\n"
"    fay capture brings them back after the fact: the collector at URL asks\n"
"    every agent connected to it (through the query connection cluster\n"
"    queries use) for the spans of trace ID (--trace), or for every span\n"
"    overlapping the last DUR (--last; --host and --service narrow it),\n"
"    stores what they answer like any span, with three tags:\n"
"        fay.capture      the capture's id\n"
"        fay.capture.at   when it was made (RFC 3339, UTC)\n"
"        fay.capture.by   what it asked for (\"trace ID\", \"last 30000ms\")\n"
"    and prints its account: the hosts asked and those that answered, the\n"
"    spans found and stored, and (by trace id) how many spans of the trace\n"
"    the hosts' flight buffers had already overwritten, then one line per\n"
"    host: answered (with its spans, and how much its flight buffer holds\n"
"    and has dropped), no\n"
"    flight buffer (an agent without --flight), missing (asked, did not\n"
"    answer within 5 s, or its connection broke), not connected (an agent\n"
"    the collector knows whose query connection is down: a killed agent),\n"
"    does not capture (an agent before this).  A child collector (fay\n"
"    collector --parent) answers for the agents under it as one host; with\n"
"    --host H, a host under a child collector is asked through it, and its\n"
"    line says \"(via CHILD)\"; a child none of whose hosts answered is\n"
"    missing.\n"
"    The spans then show in fay traces, the UI and fay sql (WHERE the tag\n"
"    fay.capture is set).\n"
"\n"
"    --when EXPR registers a capture rule (retroactive tail sampling): EXPR\n"
"    is a FayQL predicate over a span sp, the 'where' of a query over\n"
"    spans (docs/QUERY.md, \"Capture rules\"): sp.duration > 50ms,\n"
"    sp.name == \"write\" && sp.error, sp.tag(\"status\") == \"500\".  Every\n"
"    agent evaluates it on every span it drains, the unsampled ones it\n"
"    keeps in its flight buffer included; when a span matches, the\n"
"    collector waits --settle (default 300ms: the spans of the trace that\n"
"    end after it, its parents on other hosts, are drained meanwhile) and\n"
"    captures the whole trace from every agent, as --trace does, its\n"
"    fay.capture.by saying which rule and span.  A trace is captured once\n"
"    (a match of a trace pending or captured lately is counted\n"
"    deduplicated), and a rule makes at most --per-second captures a\n"
"    second (default 10; the matches over it are counted over_budget,\n"
"    also on the collector's /metrics).  Settling is a guess: a span of\n"
"    the trace that ends later still (a slow downstream call, an agent\n"
"    that drains late) is brought by the capture's follow rounds, which\n"
"    ask every agent for the trace again 250ms, 500ms, 1s, 2s ... after\n"
"    the capture, the last --follow after it (default 10s; 0: none), and\n"
"    store the spans not stored yet, tagged fay.capture.late_ms (the ms\n"
"    from the capture to the round); the account counts them (spans\n"
"    late).  The rule stands until --drop, across restarts of the\n"
"    collector (DB.captures/rules.json).  An error in EXPR is printed\n"
"    with its line and column, as fay query prints them.\n"
"\n"
"    --query NAME --last DUR brings back probe events instead: NAME is a\n"
"    standing query in keep mode (fay query --cluster URL --keep NAME\n"
"    'from s in cluster.syscall(\"getppid\") select {...} keep 30s'), whose\n"
"    hosts keep its events instead of sending them (docs/QUERY.md, \"Probe\n"
"    events in keep mode\").  Every host is asked for those that arrived in\n"
"    the last DUR; the collector keeps them (DB.captures/ID.events.jsonl)\n"
"    and the account says the events found, each host's, and how many its\n"
"    buffer had already overwritten (its bound, keep ... max N or its\n"
"    memory) when asked.  A host that keeps no events of NAME is \"not\n"
"    keeping it\".  --show ID prints such a capture's events, one JSON\n"
"    line each: {\"host\":H,\"t_ns\":ARRIVAL,\"event\":{the query's columns}}.\n"
"\n"
"    --with-query NAME --last DUR joins the two: each capture of the rule\n"
"    also captures the events standing query NAME (in keep mode) kept in\n"
"    the last DUR on the trace's hosts (the matching span's and those that\n"
"    answered with spans of it): the syscalls around a slow request, from\n"
"    where it ran.  The trace's account names that capture\n"
"    (events_capture), listed with the others.\n"
"\n"
"    --list prints the captures the collector made (the newest 256, kept\n"
"    across its restarts in DB.captures/captures.jsonl; a rule's with the\n"
"    time from the matching span's end to its trace stored, and its late\n"
"    spans), then the rules with their counts.\n"
"\n"
"OPTIONS\n"
OPT_CLUSTER_HELP("                      ")
"    --trace ID        the trace: 16 or 32 hex digits\n"
"    --last DUR        the window, ending now: 500ms, 30s, 5m (at most 24h)\n"
"    --host H          with --last: only the agent of host H (also one under\n"
"                      a child collector)\n"
"    --service S       with --last: only spans of local service S\n"
"    --query NAME      with --last: the events standing query NAME keeps\n"
"    --show ID         print the events capture ID brought back\n"
"    --when EXPR       register a capture rule (a predicate over spans sp)\n"
"    --rule EXPR       the same as --when\n"
"    --name NAME       with --when: the rule's name (1-64 of [A-Za-z0-9_];\n"
"                      default rule_ and the time)\n"
"    --per-second N    with --when: at most N captures a second (1-1000, 10)\n"
"    --settle DUR      with --when: from a match to its capture (0-60s, 300ms)\n"
"    --follow DUR      with --when: how long a capture follows its trace for\n"
"                      late spans (0-10m, 10s; 0: it does not)\n"
"    --with-query NAME with --when and --last: capture query NAME's kept\n"
"                      events of the last DUR with each trace (0-10m)\n"
"    --drop NAME       drop capture rule NAME\n"
"    --list            the captures made so far, and the rules\n"
"    --json            the collector's JSON answer as it is\n"
OPT_CLIENT_TOKEN_HELP("                      ", "write")
"                      (--list: its 'read' scope; --when, --drop: 'probe',\n"
"                      as for cluster queries)\n"
OPT_CLIENT_TLS_HELP("                      ")
"    -h, --help        this manual\n"
"\n"
"EXAMPLES\n"
"    fay capture --cluster http://127.0.0.1:9411 --trace 4bf92f3577b34da6a3ce929d0e0e4736\n"
"    fay capture --cluster http://127.0.0.1:9411 --last 30s --service mapperd\n"
"    fay capture --cluster http://127.0.0.1:9411 --query ppid --last 10s\n"
"    fay capture --cluster http://127.0.0.1:9411 --name slow_writes \\\n"
"        --when 'sp.name == \"write\" && sp.duration > 50ms'\n"
"    fay capture --cluster http://127.0.0.1:9411 --drop slow_writes\n"
"    fay traces --collector http://127.0.0.1:9411 4bf92f3577b34da6a3ce929d0e0e4736\n"
"\n"
"EXIT STATUS\n"
"    0 the capture was made (even if it found nothing: read the account),\n"
"      the rule registered or dropped,\n"
"    1 the collector could not be reached or did not store everything,\n"
"    2 usage error, or an error in a rule's EXPR.\n", f);
}

/* One host's line of an account: what ("spans", "events") it answered,
 * and its buffer's count lost ("dropped", "overwritten"). */
static void print_host(json_t *h, const char *what, const char *lost)
{
	const char *st = json_string_value(json_object_get(h, "state"));
	const char *via = json_string_value(json_object_get(h, "via"));
	char name[600];

	snprintf(name, sizeof(name), "%s%s%s%s", json_string_value(json_object_get(h, "host")),
		 via ? " (via " : "", via ? via : "", via ? ")" : "");
	printf("  %-24s %s", name, st);
	if (st && !strcmp(st, "answered"))
		printf(": %" JSON_INTEGER_FORMAT " %s (buffer: %" JSON_INTEGER_FORMAT
		       " %s held, %" JSON_INTEGER_FORMAT " %s)%s",
		       json_integer_value(json_object_get(h, what)), what,
		       json_integer_value(json_object_get(h, "held")), what,
		       json_integer_value(json_object_get(h, lost)), lost,
		       json_is_true(json_object_get(h, "cut")) ?
		       "; cut: more matched than one answer holds" : "");
	if (!strcmp(what, "spans") && json_integer_value(json_object_get(h, "overwritten")))
		printf("; %" JSON_INTEGER_FORMAT " of the trace already overwritten",
		       json_integer_value(json_object_get(h, "overwritten")));
	if (json_is_true(json_object_get(h, "partial")))
		printf("; some hosts under it did not answer");
	printf("\n");
}

/* The account of a capture of a query's kept events. */
static void print_events_account(json_t *a)
{
	json_t *h;
	size_t i;

	printf("hosts asked %" JSON_INTEGER_FORMAT ", answered %" JSON_INTEGER_FORMAT
	       "; events found %" JSON_INTEGER_FORMAT ", already overwritten %"
	       JSON_INTEGER_FORMAT " (fay capture --show %s)\n",
	       json_integer_value(json_object_get(a, "hosts_asked")),
	       json_integer_value(json_object_get(a, "hosts_answered")),
	       json_integer_value(json_object_get(a, "events_found")),
	       json_integer_value(json_object_get(a, "events_overwritten")),
	       json_string_value(json_object_get(a, "id")));
	json_array_foreach(json_object_get(a, "hosts"), i, h)
		print_host(h, "events", "overwritten");
}

static void print_account(json_t *a)
{
	json_t *hosts = json_object_get(a, "hosts"), *h;
	size_t i;

	printf("capture %s (%s) at %s\n", json_string_value(json_object_get(a, "id")),
	       json_string_value(json_object_get(a, "by")),
	       json_string_value(json_object_get(a, "at")));
	if (json_object_get(a, "query")) {
		print_events_account(a);
		return;
	}
	printf("hosts asked %" JSON_INTEGER_FORMAT ", answered %" JSON_INTEGER_FORMAT
	       "; spans found %" JSON_INTEGER_FORMAT ", stored %" JSON_INTEGER_FORMAT
	       ", already overwritten %" JSON_INTEGER_FORMAT "\n",
	       json_integer_value(json_object_get(a, "hosts_asked")),
	       json_integer_value(json_object_get(a, "hosts_answered")),
	       json_integer_value(json_object_get(a, "spans_found")),
	       json_integer_value(json_object_get(a, "spans_stored")),
	       json_integer_value(json_object_get(a, "spans_overwritten")));
	json_array_foreach(hosts, i, h)
		print_host(h, "spans", "dropped");
	if (json_object_get(a, "rule"))
		printf("  by rule %s: %" JSON_INTEGER_FORMAT " ms from the span's end to stored\n",
		       json_string_value(json_object_get(a, "rule")),
		       json_integer_value(json_object_get(a, "latency_ms")));
	if (json_object_get(a, "events_capture"))
		printf("  with its hosts' kept events: capture %s\n",
		       json_string_value(json_object_get(a, "events_capture")));
	if (json_integer_value(json_object_get(a, "follow_ms")))
		printf("  followed%s: %" JSON_INTEGER_FORMAT " spans late (the last %"
		       JSON_INTEGER_FORMAT " ms after the capture), %" JSON_INTEGER_FORMAT
		       " rounds%s%s\n",
		       json_is_true(json_object_get(a, "following")) ? " (still)" : "",
		       json_integer_value(json_object_get(a, "spans_late")),
		       json_integer_value(json_object_get(a, "last_late_ms")),
		       json_integer_value(json_object_get(a, "follow_rounds")),
		       json_object_get(a, "follow_cut") ? "; cut: " : "",
		       json_object_get(a, "follow_cut") ?
		       json_string_value(json_object_get(a, "follow_cut")) : "");
	if (json_object_get(a, "error"))
		printf("error: %s\n", json_string_value(json_object_get(a, "error")));
}

static void print_rule(json_t *r)
{
	printf("rule %s: %s\n", json_string_value(json_object_get(r, "name")),
	       json_string_value(json_object_get(r, "expr")));
	printf("  matches %" JSON_INTEGER_FORMAT ", captures %" JSON_INTEGER_FORMAT
	       ", deduplicated %" JSON_INTEGER_FORMAT ", over budget %" JSON_INTEGER_FORMAT
	       ", spans late %" JSON_INTEGER_FORMAT " (%" JSON_INTEGER_FORMAT "/s, settle %"
	       JSON_INTEGER_FORMAT " ms, follow %" JSON_INTEGER_FORMAT " ms)%s\n",
	       json_integer_value(json_object_get(r, "matches")),
	       json_integer_value(json_object_get(r, "captures")),
	       json_integer_value(json_object_get(r, "deduplicated")),
	       json_integer_value(json_object_get(r, "over_budget")),
	       json_integer_value(json_object_get(r, "spans_late")),
	       json_integer_value(json_object_get(r, "per_s")),
	       json_integer_value(json_object_get(r, "settle_ms")),
	       json_integer_value(json_object_get(r, "follow_ms")),
	       json_is_true(json_object_get(r, "running")) ? "" : "; not running (no agent)");
	if (json_object_get(r, "with_query"))
		printf("  with query %s's events of the last %" JSON_INTEGER_FORMAT " ms\n",
		       json_string_value(json_object_get(r, "with_query")),
		       json_integer_value(json_object_get(r, "with_last_ms")));
}

/* A name for a rule registered without --name: rule_ and the time in ms. */
static const char *rule_name(char *buf, size_t len)
{
	snprintf(buf, len, "rule_%" PRIu64, clock_realtime_ns() / 1000000u);
	return buf;
}

/* --when (register rule name; per_s 0, settle_ms and follow_ms -1: the
 * collector's defaults) or --drop NAME. */
static int rule_cmd(const char *url, const char *when, const char *name, long per_s,
		    long settle_ms, long follow_ms, const char *with_query, uint64_t with_ms,
		    const char *drop, const char *token, int json)
{
	struct tr_http_resp resp = { 0 };
	char full[2048], err[512], *body = NULL;
	json_t *a;
	int rc;

	if (drop) {
		snprintf(full, sizeof(full), "%s/api/captures/rules/%s", url, drop);
	} else {
		json_t *o = json_pack("{s:s, s:s}", "name", name, "expr", when);

		if (o && per_s)
			json_object_set_new(o, "per_s", json_integer(per_s));
		if (o && settle_ms >= 0)
			json_object_set_new(o, "settle_ms", json_integer(settle_ms));
		if (o && follow_ms >= 0)
			json_object_set_new(o, "follow_ms", json_integer(follow_ms));
		if (o && with_query) {
			json_object_set_new(o, "with_query", json_string(with_query));
			json_object_set_new(o, "with_last_ms", json_integer((json_int_t)with_ms));
		}
		body = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (!body) {
			fprintf(stderr, "error: out of memory\n");
			return 1;
		}
		snprintf(full, sizeof(full), "%s/api/captures/rules", url);
	}
	rc = tr_http(drop ? "DELETE" : "POST", full, body, token, &resp, err, sizeof(err));
	free(body);
	if (rc) {
		fprintf(stderr, "error: %s: %s\n", url, err);
		free(resp.body);
		return 1;
	}
	a = json_loads(resp.body ? resp.body : "", 0, NULL);
	if (resp.status != 200 && resp.status != 201) {
		const char *e = json_string_value(json_object_get(a, "error"));

		if (e)		/* a rule's error: line:col, its line, a caret */
			fprintf(stderr, "%s%s", e, e[0] && e[strlen(e) - 1] == '\n' ? "" : "\n");
		else
			fprintf(stderr, "error: %s: HTTP %ld: %s", url, resp.status,
				resp.body ? resp.body : "\n");
		json_decref(a);
		free(resp.body);
		return resp.status == 400 || resp.status == 404 || resp.status == 409 ? 2 : 1;
	}
	if (json)
		printf("%s\n", resp.body ? resp.body : "");
	else if (drop)
		printf("capture rule %s dropped\n", drop);
	else
		printf("capture rule %s: %s\n", name, when);
	json_decref(a);
	free(resp.body);
	return 0;
}

/* --show ID: the events capture ID brought back, as the collector keeps
 * them (JSON lines). */
static int show_events(const char *url, const char *id, const char *token)
{
	char full[2048];

	snprintf(full, sizeof(full), "%s/api/captures/%s/events", url, id);
	return tr_http_to_stdout("GET", full, NULL, token, url, true);
}

int cmd_capture(int argc, char **argv)
{
	enum { O_TRACE = 256, O_LAST, O_HOST, O_SERVICE, O_LIST, O_JSON, O_WHEN, O_NAME,
	       O_PER_S, O_SETTLE, O_FOLLOW, O_DROP, O_QUERY, O_SHOW, O_WITH_QUERY };
	static const struct option lopts[] = {
		OPT_CLUSTER_ROW,
		{ "trace", required_argument, NULL, O_TRACE },
		{ "last", required_argument, NULL, O_LAST },
		{ "host", required_argument, NULL, O_HOST },
		{ "service", required_argument, NULL, O_SERVICE },
		{ "list", no_argument, NULL, O_LIST },
		{ "when", required_argument, NULL, O_WHEN },
		{ "rule", required_argument, NULL, O_WHEN },
		{ "name", required_argument, NULL, O_NAME },
		{ "per-second", required_argument, NULL, O_PER_S },
		{ "settle", required_argument, NULL, O_SETTLE },
		{ "follow", required_argument, NULL, O_FOLLOW },
		{ "drop", required_argument, NULL, O_DROP },
		{ "query", required_argument, NULL, O_QUERY },
		{ "show", required_argument, NULL, O_SHOW },
		{ "with-query", required_argument, NULL, O_WITH_QUERY },
		{ "json", no_argument, NULL, O_JSON },
		OPT_CLIENT_TOKEN_ROWS,
		OPT_CLIENT_TLS_ROWS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *url = NULL, *trace = NULL, *last = NULL, *host = NULL, *service = NULL;
	struct opt_client_token tok;
	const char *when = NULL, *name = NULL, *per_s = NULL, *settle = NULL, *drop = NULL;
	const char *follow = NULL, *query = NULL, *show = NULL, *with_query = NULL;
	char gen_name[32];
	uint64_t settle_ns = 0, follow_ns = 0;
	long per_s_n = 0;
	struct tr_http_resp resp = { 0 };
	int opt, list = 0, json = 0, rc;
	char full[2048], err[512], *body = NULL;
	uint64_t last_ns = 0;
	json_t *a;

	opt_client_token_init(&tok);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+h", lopts, NULL)) != -1) {
		rc = opt_client_token(opt, optarg, &tok);
		if (rc < 0)
			return 2;
		if (rc || opt_client_tls(opt, optarg))
			continue;
		switch (opt) {
		case OPT_CLUSTER: url = optarg; break;
		case O_TRACE: trace = optarg; break;
		case O_LAST: last = optarg; break;
		case O_HOST: host = optarg; break;
		case O_SERVICE: service = optarg; break;
		case O_LIST: list = 1; break;
		case O_WHEN: when = optarg; break;
		case O_NAME: name = optarg; break;
		case O_PER_S: per_s = optarg; break;
		case O_SETTLE: settle = optarg; break;
		case O_FOLLOW: follow = optarg; break;
		case O_DROP: drop = optarg; break;
		case O_QUERY: query = optarg; break;
		case O_SHOW: show = optarg; break;
		case O_WITH_QUERY: with_query = optarg; break;
		case O_JSON: json = 1; break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "Run 'fay capture --help' for the manual.\n");
			return 2;
		}
	}
	if (optind != argc || !url ||
	    (!!trace + (!!last && !when) + list + !!when + !!drop + !!show) != 1) {
		fprintf(stderr, "error: want --cluster URL and one of --trace ID, --last DUR "
			"[--query NAME], --when EXPR, --drop NAME, --list, --show ID\n"
			"Run 'fay capture --help' for the manual.\n");
		return 2;
	}
	if ((name || per_s || settle || follow || with_query) && !when) {
		fprintf(stderr, "error: --name, --per-second, --settle, --follow and --with-query "
			"go with --when\n");
		return 2;
	}
	if (when && !!with_query != !!last) {
		fprintf(stderr, "error: with --when, --with-query NAME and --last DUR go together\n");
		return 2;
	}
	if (when && last && (clock_parse_duration(last, &last_ns) || last_ns < 1000000u ||
			     last_ns > 600000000000ull)) {
		fprintf(stderr, "error: --last '%s': want a duration from 1ms to 10m\n", last);
		return 2;
	}
	if (per_s) {
		char *end;

		per_s_n = strtol(per_s, &end, 10);
		if (*end || end == per_s || per_s_n < 1 || per_s_n > 1000) {
			fprintf(stderr, "error: --per-second '%s': want 1 to 1000\n", per_s);
			return 2;
		}
	}
	if (settle && (clock_parse_duration(settle, &settle_ns) || settle_ns > 60000000000ull)) {
		fprintf(stderr, "error: --settle '%s': want a duration from 0 to 60s (300ms)\n",
			settle);
		return 2;
	}
	if (follow && (clock_parse_duration(follow, &follow_ns) || follow_ns > 600000000000ull)) {
		fprintf(stderr, "error: --follow '%s': want a duration from 0 to 10m (10s)\n",
			follow);
		return 2;
	}
	if (when || drop)
		return rule_cmd(url, when, name ? name : rule_name(gen_name, sizeof(gen_name)),
				per_s ? per_s_n : 0, settle ? (long)(settle_ns / 1000000u) : -1,
				follow ? (long)(follow_ns / 1000000u) : -1, with_query,
				last_ns / 1000000u, drop, tok.token, json);
	if ((host || service || query) && !last) {
		fprintf(stderr, "error: --host, --service and --query go with --last\n");
		return 2;
	}
	if (query && service) {
		fprintf(stderr, "error: --service goes with spans, not with --query\n");
		return 2;
	}
	if (show)
		return show_events(url, show, tok.token);
	if (last && (clock_parse_duration(last, &last_ns) || last_ns < 1000000u ||
		     last_ns > 24ull * 3600 * 1000000000u)) {
		fprintf(stderr, "error: --last '%s': want a duration from 1ms to 24h (500ms, 30s, 5m)\n",
			last);
		return 2;
	}
	snprintf(full, sizeof(full), "%s/api/captures", url);
	if (!list) {
		json_t *o = trace ? json_pack("{s:s}", "trace_id", trace) :
			json_pack("{s:I}", "last_ms", (json_int_t)(last_ns / 1000000u));

		if (o && query)
			json_object_set_new(o, "query", json_string(query));

		if (o && host)
			json_object_set_new(o, "host", json_string(host));
		if (o && service)
			json_object_set_new(o, "service", json_string(service));
		body = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (!body) {
			fprintf(stderr, "error: out of memory\n");
			return 1;
		}
	}
	rc = tr_http(list ? "GET" : "POST", full, body, tok.token, &resp, err, sizeof(err));
	free(body);
	if (rc) {
		fprintf(stderr, "error: %s: %s\n", url, err);
		free(resp.body);
		return 1;
	}
	if (resp.status != 200 && resp.status != 503) {
		fprintf(stderr, "error: %s: HTTP %ld: %s", url, resp.status,
			resp.body ? resp.body : "\n");
		free(resp.body);
		return resp.status == 400 || resp.status == 404 ? 2 : 1;
	}
	a = json_loads(resp.body ? resp.body : "", 0, NULL);
	if (json || !a) {
		fwrite(resp.body, 1, resp.len, stdout);
		if (resp.len && resp.body[resp.len - 1] != '\n')
			putchar('\n');
	} else if (list) {
		json_t *v;
		size_t i;

		json_array_foreach(json_object_get(a, "captures"), i, v)
			print_account(v);
		json_array_foreach(json_object_get(a, "rules"), i, v)
			print_rule(v);
	} else {
		print_account(a);
	}
	json_decref(a);
	free(resp.body);
	return resp.status == 200 ? 0 : 1;
}
