// SPDX-License-Identifier: MIT
/*
 * fay sql: one read-only SQL statement on the span store (SQLite file,
 * ClickHouse server, or a running collector's store), as a table or JSON.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/opts.h"
#include "cli/cmds.h"
#include "cli/traces.h"
#include "common/err.h"
#include "store/store.h"

static void usage(FILE *f)
{
	fputs(
"NAME\n"
"    fay sql - run a read-only SQL statement on the span store\n"
"\n"
"SYNOPSIS\n"
"    fay sql [--json] [--db PATH | --clickhouse URL | --collector URL] 'SELECT ...'\n"
"\n"
"DESCRIPTION\n"
"    Sends one statement to the store and prints the answer as an aligned\n"
"    table (NULL for SQL NULL, then the row count) or, with --json, as a JSON\n"
"    array of objects (column name to text, null).  Only statements that\n"
"    read are run: an SQLite file is opened read-only and a statement\n"
"    sqlite3_stmt_readonly() refuses is not run; ClickHouse runs it with the\n"
"    readonly=1 setting.  The tables of both stores, with examples:\n"
"    docs/SQL.md.\n"
"\n"
"OPTIONS\n"
"    --db PATH         an SQLite store (default ./fay.db)\n"
"    --clickhouse URL  a ClickHouse store: http://HOST:8123[/DATABASE]\n"
"                      (database fay by default), as fay collector --clickhouse\n"
"    --collector URL   the store of a running collector (POST URL/api/sql)\n"
OPT_CLIENT_TOKEN_HELP("                      ", "read")
OPT_CLIENT_TLS_HELP("                      ")
"    --json            JSON instead of a table\n"
"    -h, --help        this manual\n"
"\n"
"EXAMPLES\n"
"    fay sql 'SELECT local_service, count(*) FROM spans GROUP BY 1'\n"
"    fay sql --clickhouse http://127.0.0.1:8123/fay --json \\\n"
"        'SELECT name, quantile(0.99)(duration_us) AS p99 FROM spans FINAL GROUP BY name'\n"
"    fay sql --collector http://127.0.0.1:9411 'SELECT count() FROM spans FINAL'\n"
"    fay sql 'SELECT * FROM span_rows\n"
"             WHERE seq_no >= (42 << 20) AND seq_no < (43 << 20)'\n"
"        (SQLite: the spans of trace seq 42 by their key, which seeks;\n"
"        WHERE trace_seq = 42 on the view spans reads every row: docs/SQL.md)\n"
"\n"
"EXIT STATUS\n"
"    0 answered, 1 the store cannot be reached or opened, 2 usage error or\n"
"    a statement the store refused (the reason is printed).\n", f);
}

/* URL-encode s after "?sql=" is not needed: the statement is the body. */
static int via_collector(const char *url, const char *sql, const char *token, int json)
{
	char full[2048];

	snprintf(full, sizeof(full), "%s/api/sql?format=%s", url, json ? "json" : "table");
	return tr_http_to_stdout("POST", full, sql, token, url, false);
}

int cmd_sql(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "db", required_argument, NULL, 'd' },
		{ "clickhouse", required_argument, NULL, 'C' },
		{ "collector", required_argument, NULL, 'c' },
		OPT_CLIENT_TOKEN_ROWS,
		OPT_CLIENT_TLS_ROWS,
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *db = NULL, *ch = NULL, *coll = NULL;
	struct opt_client_token tok;
	struct store_sql_out o = { .f = stdout };
	struct store_sql_cb cb = { store_sql_out_columns, store_sql_out_row, &o };
	char where[2048], err[512];
	struct store_reader *r;
	struct store *st;
	int opt, ret;

	opt_client_token_init(&tok);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+h", lopts, NULL)) != -1) {
		ret = opt_client_token(opt, optarg, &tok);
		if (ret < 0)
			return 2;
		if (ret)
			continue;
		switch (opt) {
		case 'd': db = optarg; break;
		case 'C': ch = optarg; break;
		case 'c': coll = optarg; break;
		case OPT_TLS_CA:
		case OPT_TLS_CERT:
		case OPT_TLS_KEY:
			opt_client_tls(opt, optarg);
			break;
		case 'j': o.json = 1; break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "Run 'fay sql --help' for the manual.\n");
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "error: expected one SQL statement (quoted)\n"
			"Run 'fay sql --help' for the manual.\n");
		return 2;
	}
	if (!!db + !!ch + !!coll > 1) {
		fprintf(stderr, "error: --db, --clickhouse and --collector: one of them\n");
		return 2;
	}
	if (coll)
		return via_collector(coll, argv[optind], tok.token, o.json);
	if (ch)
		snprintf(where, sizeof(where), "clickhouse:%s", ch);
	else
		snprintf(where, sizeof(where), "%s", db ? db : "./fay.db");
	st = store__open(where, STORE_F_READONLY, err, sizeof(err));
	if (!st) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	r = store__reader_new(st);
	if (!r) {
		fprintf(stderr, "error: %s: cannot read: %s\n", where, strerror(errno));
		store__close(st);
		return 1;
	}
	err[0] = '\0';
	ret = store__sql(r, argv[optind], &cb, err, sizeof(err));
	if (!ret)
		ret = store_sql_out_end(&o);
	store_sql_out_free(&o);
	store__reader_free(r);
	store__close(st);
	if (ret) {
		fprintf(stderr, "error: %s\n", err[0] ? err : strerror(-ret));
		return ret == -ECONNREFUSED || ret == -ETIMEDOUT || ret == -EHOSTUNREACH ? 1 : 2;
	}
	return 0;
}
