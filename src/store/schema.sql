-- SPDX-License-Identifier: MIT
--
-- Store schema
-- ============
--
-- The SQLite store of `fay collector` (src/store/sqlite.c embeds this file
-- and runs it on a new database).  PRAGMA application_id is 0x46415953
-- ("FAYS"), PRAGMA user_version is the schema version (5).  A database
-- with another application_id, or a user_version newer than the running
-- fay knows, is refused and never modified.  An older user_version is
-- brought up to date by the migrations in src/store/sqlite.c
-- (store_migrations[]: the code that takes version N to N+1, each run in
-- its own transaction with the new user_version; 1 -> 2 and 2 -> 3 are
-- in src/store/migrate.c, 3 -> 4 adds query_windows, 4 -> 5 keys the
-- spans by one integer, in migrate.c); this file always holds the newest schema, for new
-- databases (every statement is IF NOT EXISTS: a migration runs it too,
-- to create the objects that are new).
--
-- Durability: journal_mode=WAL with synchronous=NORMAL.  A COMMIT appends
-- the transaction to the -wal file with write(2) before it returns, so
-- once the collector acknowledges a batch (it does so only after COMMIT)
-- the data is in the kernel's page cache: a kill -9 of the collector, or
-- any crash of the process, loses nothing acknowledged, and the next open
-- replays the WAL.  The WAL is fsync'ed at checkpoints, not at every
-- commit: a power loss or kernel crash can lose the transactions committed
-- since the last checkpoint (the store checkpoints on a background thread
-- once the WAL holds 4096 pages, 16 MiB), but never corrupts the
-- database; the agents
-- still hold those batches only if they were not yet acknowledged.  Run
-- with FAY_STORE_SYNC=full to fsync every commit when that matters more
-- than ingest speed.
--
-- Ids: SQLite integers are signed 64-bit; trace and span ids (unsigned
-- 64-bit) are stored as the same 64 bits (two's complement), so
-- 0xffffffffffffffff is stored as -1.  Times are microseconds since the
-- epoch, as in Zipkin.
--
-- Layout (schema version 2; version 1 had one spans table with three
-- secondary indexes, see the migration in src/store/sqlite.c): a trace id
-- is random, so any B-tree keyed by it takes its inserts at random pages,
-- and with a commit per batch every such insert dirties (and writes to the
-- WAL) a page of its own.  Version 2 therefore keys the random trace id
-- once per trace, in traces_id, and everything else by traces.seq, a
-- number given to each trace in arrival order: spans are clustered by
-- (trace seq, arrival number), so new spans append at the end of the
-- table and the spans of one trace sit together.  The trace search walks
-- traces_ts, a covering index of one entry per trace (timestamp, longest
-- span, Bloom filter of the trace's search terms), and reads the spans of
-- only the traces that may match.  Retention deletes whole traces.
--
-- Where BlkKin partial records become spans: at insert.  span_parts keeps
-- every partial record; the transaction that stores parts of a span id
-- also replaces that id's spans with origin = 1 by the merge of all its
-- parts (Zipkin's V1SpanConverter rule, src/store/span.c zparts_merge(); a
-- span with annotations but none of cs/sr/ms/mr gets Zipkin 1.x's
-- timestamp = first annotation, duration = last - first).

-- One row per trace, kept up to date by every transaction that adds
-- spans to it (the store aggregates a transaction's spans per trace in
-- memory, then writes each trace row once).
CREATE TABLE IF NOT EXISTS traces (
	seq            INTEGER PRIMARY KEY,  -- arrival order; spans.trace_seq
	trace_hi       INTEGER NOT NULL,  -- high 64 bits of a 128-bit trace id, 0 for 64-bit ids
	trace_lo       INTEGER NOT NULL,  -- low 64 bits
	ts_us          INTEGER NOT NULL,  -- Zipkin's trace timestamp: root_us, else min_us, else 0
	root_us        INTEGER,           -- earliest timestamp of a root span (no parent)
	min_us         INTEGER,           -- earliest span timestamp
	end_us         INTEGER NOT NULL,  -- latest span end (timestamp + duration); when no
	                                  -- span has a timestamp: when the trace was stored
	max_dur_us     INTEGER NOT NULL,  -- longest span duration
	nspans         INTEGER NOT NULL,  -- spans in the table
	next_no        INTEGER NOT NULL,  -- spans.no of the trace's next span
	error          INTEGER NOT NULL,  -- 1: a span has an "error" tag
	root_service   TEXT,              -- the earliest root span's local service and name
	root_name      TEXT,
	bloom          BLOB NOT NULL      -- 64 bytes: Bloom filter of the spans' search terms
	                                  -- (service, span name, remote service, annotation
	                                  -- values, tag keys, key=value; per service and for
	                                  -- any service), two bits per term; src/store/rowcodec.c
);
-- Find a trace by id (the one index keyed by a random value).
CREATE UNIQUE INDEX IF NOT EXISTS traces_id ON traces (trace_hi, trace_lo);
-- Trace search, newest first, without reading the table (covering).
CREATE INDEX IF NOT EXISTS traces_ts ON traces (ts_us, max_dur_us, bloom);
-- Retention and the dashboards' time scans.
CREATE INDEX IF NOT EXISTS traces_end ON traces (end_us);

-- One row per Zipkin v2 span, keyed by one integer made of the trace's
-- seq and the span's arrival number in it (schema version 5):
--   seq_no = trace_seq << 20 | no   (trace_seq < 2^43, no < 2^20)
-- A rowid table whose key grows is appended to: SQLite splits its last
-- page (balance_quick) instead of rebalancing three siblings, which a
-- WITHOUT ROWID table keyed by (trace_seq, no) did every 3-4 rows.
-- The limits: a trace holds at most 1,048,576 spans (a span beyond is
-- not stored: the collector logs it with the trace id, OTLP's
-- partial_success counts it rejected), and 2^43 traces
-- are numbered (then writes fail, saying so).  A trace's spans are the
-- key range [seq << 20, (seq + 1) << 20): every reader of fay's reads
-- them so.  The view `spans` below shows the table with the columns of
-- schema 4 (SELECT * is unchanged); see it for what a WHERE on its
-- trace_seq costs.
CREATE TABLE IF NOT EXISTS span_rows (
	seq_no         INTEGER PRIMARY KEY,  -- trace_seq << 20 | no
	id             INTEGER NOT NULL,  -- span id, never 0
	parent_id      INTEGER,           -- NULL for a root span
	kind           INTEGER NOT NULL,  -- 0 none, 1 CLIENT, 2 SERVER, 3 PRODUCER, 4 CONSUMER
	name           TEXT,              -- lower case (as Zipkin), NULL when absent
	local_service  TEXT,              -- localEndpoint.serviceName, lower case
	local_ipv4     TEXT,
	local_ipv6     TEXT,
	local_port     INTEGER,
	remote_service TEXT,              -- remoteEndpoint.serviceName
	remote_ipv4    TEXT,
	remote_ipv6    TEXT,
	remote_port    INTEGER,
	start_us       INTEGER,           -- timestamp, NULL when absent
	duration_us    INTEGER,           -- NULL when absent
	shared         INTEGER NOT NULL DEFAULT 0,
	debug          INTEGER NOT NULL DEFAULT 0,
	error          INTEGER NOT NULL DEFAULT 0,  -- 1: has an "error" tag
	origin         INTEGER NOT NULL DEFAULT 0,  -- 0 as received, 1 merged from span_parts
	extra          BLOB               -- annotations and tags, NULL if none:
	                                  --   format byte 1, varint n, n x (varint timestamp,
	                                  --   varint len, value bytes), varint m, m x (varint
	                                  --   len, key, varint len, value); annotations sorted
	                                  --   by (timestamp, value), tags by key (LEB128
	                                  --   varints, strings UTF-8 without NUL)
);
-- The spans as schema 4 had them: trace_seq and no, then the columns of
-- span_rows.  `SELECT * FROM spans` answers as before.  A condition on
-- its trace_seq or no is on an expression of the key: SQLite cannot seek
-- by it and reads the whole table (60-110 ms a query on a million small
-- spans on this machine, 0.2 ms before: docs/SQL.md).  To read one
-- trace's spans, give span_rows
-- the key's range, as fay's readers do:
--   SELECT * FROM span_rows WHERE seq_no >= (:seq << 20)
--     AND seq_no < ((:seq + 1) << 20)
-- (or join traces t with span_rows s ON s.seq_no >= (t.seq << 20) AND
-- s.seq_no < ((t.seq + 1) << 20)).
CREATE VIEW IF NOT EXISTS spans AS SELECT
	seq_no >> 20 AS trace_seq, seq_no & 1048575 AS no,
	id, parent_id, kind, name, local_service, local_ipv4, local_ipv6, local_port,
	remote_service, remote_ipv4, remote_ipv6, remote_port, start_us, duration_us,
	shared, debug, error, origin, extra
	FROM span_rows;

-- BlkKin partial records: one annotation or one key-value of a span.
CREATE TABLE IF NOT EXISTS span_parts (
	trace_seq      INTEGER NOT NULL,  -- traces.seq
	id             INTEGER NOT NULL,
	parent_id      INTEGER,
	name           TEXT,
	service        TEXT,              -- the recording process's endpoint
	ipv4           TEXT,
	ipv6           TEXT,
	port           INTEGER,
	remote_service TEXT,
	remote_ipv4    TEXT,
	remote_ipv6    TEXT,
	remote_port    INTEGER,
	debug          INTEGER NOT NULL DEFAULT 0,
	is_tag         INTEGER NOT NULL,  -- 0 annotation (ts_us, key), 1 tag (key, value)
	ts_us          INTEGER,           -- annotation time; tags: time they were stored
	key            TEXT NOT NULL,     -- annotation value or tag key
	value          TEXT               -- tag value
);
CREATE INDEX IF NOT EXISTS span_parts_span ON span_parts (trace_seq, id);

-- Names for the query API (/api/v2/services, /spans, /remoteServices).
-- last_us: the newest span start seen with the name (updated at most once
-- a minute per name); retention forgets names older than its cutoff.
CREATE TABLE IF NOT EXISTS services (
	name           TEXT PRIMARY KEY,
	last_us        INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS span_names (
	service        TEXT NOT NULL,
	name           TEXT NOT NULL,
	last_us        INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (service, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS remote_services (
	service        TEXT NOT NULL,
	remote         TEXT NOT NULL,
	last_us        INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (service, remote)
) WITHOUT ROWID;

-- Values of the tags whose key is one of `fay collector --autocomplete-keys`
-- (Zipkin's /api/v2/autocompleteValues), recorded as spans arrive (schema
-- version 3); last_us and retention as for the names above.
CREATE TABLE IF NOT EXISTS autocomplete (
	key            TEXT NOT NULL,
	value          TEXT NOT NULL,
	last_us        INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (key, value)
) WITHOUT ROWID;

-- Agents that spoke to this collector.  last_seq is the highest batch seq
-- committed for the agent: it is updated in the same transaction as the
-- batch's spans, which is what makes "seq <= last_seq => duplicate" exact.
CREATE TABLE IF NOT EXISTS agents (
	agent_id       TEXT PRIMARY KEY,  -- 32 hex digits
	host           TEXT,
	version        TEXT,
	last_seq       INTEGER NOT NULL DEFAULT 0,
	first_seen_us  INTEGER,
	last_seen_us   INTEGER,
	batches        INTEGER NOT NULL DEFAULT 0,
	spans          INTEGER NOT NULL DEFAULT 0,  -- spans and parts stored
	stats          TEXT,              -- latest STATS frame (JSON)
	stats_us       INTEGER
) WITHOUT ROWID;

-- Standing queries' windows (schema version 4): one row per (query name,
-- window end, host) for the merged answer (host '*') and for each host's
-- finalized partial answer (host: its name).  A window written again (an
-- amended one, a retry) replaces its row when its written_us is not older.
-- Retention deletes windows that ended before its cutoff.  docs/SQL.md.
CREATE TABLE IF NOT EXISTS query_windows (
	name           TEXT NOT NULL,     -- the standing query
	start_us       INTEGER NOT NULL,  -- the window, [start_us, end_us), microseconds
	end_us         INTEGER NOT NULL,
	host           TEXT NOT NULL,     -- '*': the merged answer; else the host's own
	answer         TEXT NOT NULL,     -- the window as JSON (/api/queries/NAME/results)
	asked          INTEGER NOT NULL,  -- hosts asked
	answered       INTEGER NOT NULL,  -- hosts that answered in time
	missing        TEXT NOT NULL,     -- JSON array of the hosts missing
	provisional    INTEGER NOT NULL,  -- 1: a host had not answered by the grace period
	amended        INTEGER NOT NULL,  -- 1: emitted again with a late host's rows
	written_us     INTEGER NOT NULL,  -- when written (the newest wins)
	PRIMARY KEY (name, end_us, host)
);
CREATE INDEX IF NOT EXISTS query_windows_end ON query_windows (end_us);
