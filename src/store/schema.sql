-- SPDX-License-Identifier: MIT
--
-- Store schema
-- ============
--
-- The SQLite store of `fay collector` (src/store/sqlite.c embeds this file
-- and runs it on a new database).  PRAGMA application_id is 0x46415953
-- ("FAYS"), PRAGMA user_version is the schema version (1).  A database
-- with another application_id, or a user_version newer than the running
-- fay knows, is refused and never modified.  An older user_version is
-- brought up to date by the migrations in src/store/sqlite.c
-- (store_migrations[]: the SQL that takes version N to N+1, each run in
-- its own transaction with the new user_version); this file always holds
-- the newest schema, for new databases.
--
-- Durability: journal_mode=WAL with synchronous=NORMAL.  A COMMIT appends
-- the transaction to the -wal file with write(2) before it returns, so
-- once the collector acknowledges a batch (it does so only after COMMIT)
-- the data is in the kernel's page cache: a kill -9 of the collector, or
-- any crash of the process, loses nothing acknowledged, and the next open
-- replays the WAL.  The WAL is fsync'ed at checkpoints, not at every
-- commit: a power loss or kernel crash can lose the transactions committed
-- since the last checkpoint (at most ~1000 pages of WAL with SQLite's
-- default auto-checkpoint), but never corrupts the database; the agents
-- still hold those batches only if they were not yet acknowledged.  Run
-- with FAY_STORE_SYNC=full to fsync every commit when that matters more
-- than ingest speed.
--
-- Ids: SQLite integers are signed 64-bit; trace and span ids (unsigned
-- 64-bit) are stored as the same 64 bits (two's complement), so
-- 0xffffffffffffffff is stored as -1.  Times are microseconds since the
-- epoch, as in Zipkin.
--
-- Where BlkKin partial records become spans: at insert.  span_parts keeps
-- every partial record; the transaction that stores parts of a span id
-- also replaces that id's spans with origin = 1 by the merge of all its
-- parts (Zipkin's V1SpanConverter rule, src/store/span.c zparts_merge()).

-- One row per Zipkin v2 span.
CREATE TABLE spans (
	trace_hi       INTEGER NOT NULL,  -- high 64 bits of a 128-bit trace id, 0 for 64-bit ids  [indexed]
	trace_lo       INTEGER NOT NULL,  -- low 64 bits                                            [indexed]
	id             INTEGER NOT NULL,  -- span id, never 0
	parent_id      INTEGER,           -- NULL for a root span
	kind           INTEGER NOT NULL,  -- 0 none, 1 CLIENT, 2 SERVER, 3 PRODUCER, 4 CONSUMER
	name           TEXT,              -- lower case (as Zipkin), NULL when absent
	local_service  TEXT,              -- localEndpoint.serviceName, lower case              [indexed]
	local_ipv4     TEXT,
	local_ipv6     TEXT,
	local_port     INTEGER,
	remote_service TEXT,              -- remoteEndpoint.serviceName
	remote_ipv4    TEXT,
	remote_ipv6    TEXT,
	remote_port    INTEGER,
	start_us       INTEGER,           -- timestamp, NULL when absent                         [indexed]
	duration_us    INTEGER,           -- NULL when absent
	shared         INTEGER NOT NULL DEFAULT 0,
	debug          INTEGER NOT NULL DEFAULT 0,
	error          INTEGER NOT NULL DEFAULT 0,  -- 1: has an "error" tag
	annotations    TEXT,              -- JSON [{"timestamp":us,"value":"..."}], sorted; NULL if none
	tags           TEXT,              -- JSON {"key":"value"}, keys sorted; NULL if none
	origin         INTEGER NOT NULL DEFAULT 0   -- 0 as received, 1 merged from span_parts
);
-- Fetch a trace; find the merged spans of a span id.
CREATE INDEX spans_trace ON spans (trace_hi, trace_lo, id);
-- Trace search by service and time (and the span names of a service).
CREATE INDEX spans_service_ts ON spans (local_service, start_us);
-- Trace search over all services; retention.
CREATE INDEX spans_ts ON spans (start_us);

-- BlkKin partial records: one annotation or one key-value of a span.
CREATE TABLE span_parts (
	trace_hi       INTEGER NOT NULL,
	trace_lo       INTEGER NOT NULL,
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
CREATE INDEX span_parts_span ON span_parts (trace_hi, trace_lo, id);
CREATE INDEX span_parts_ts ON span_parts (ts_us);

-- Names for the query API (/api/v2/services, /spans, /remoteServices).
CREATE TABLE services (
	name           TEXT PRIMARY KEY
) WITHOUT ROWID;
CREATE TABLE span_names (
	service        TEXT NOT NULL,
	name           TEXT NOT NULL,
	PRIMARY KEY (service, name)
) WITHOUT ROWID;
CREATE TABLE remote_services (
	service        TEXT NOT NULL,
	remote         TEXT NOT NULL,
	PRIMARY KEY (service, remote)
) WITHOUT ROWID;

-- Agents that spoke to this collector.  last_seq is the highest batch seq
-- committed for the agent: it is updated in the same transaction as the
-- batch's spans, which is what makes "seq <= last_seq => duplicate" exact.
CREATE TABLE agents (
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
