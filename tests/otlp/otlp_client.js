// SPDX-License-Identifier: MIT
// OTLP test client (tests/integration/otlp_*.sh): OpenTelemetry's JS SDK
// and its real exporters against a running fay collector.
//
//   node otlp_client.js roundtrip MODE SEND_URL READ_URL
//        MODE: proto | proto-gzip | json | json-gzip | grpc | grpc-gzip | zipkin
//        Emit spans of every kind with attributes of every type (string,
//        int, double, bool, arrays of each), events, links, status,
//        parent/child; export them with that exporter; read the trace back
//        (GET READ_URL/api/v2/trace/ID) and compare field by field with
//        OpenTelemetry's Zipkin transformation (for zipkin: with what the
//        Zipkin exporter itself sent).
//   node otlp_client.js partial SEND_URL READ_URL
//        One valid span and two invalid ones (zero trace id, end before
//        start) in one protobuf request: 200, partial_success
//        rejected_spans 2 with a message, the valid span stored.
//   node otlp_client.js burst SEND_URL READ_URL REQUESTS SPANS CONCURRENCY
//        Drive /v1/traces past the ingest queue; print JSON counts; check
//        429 + Retry-After, then acceptance of the refused requests after
//        the burst, and sent == stored + rejected.
//   node otlp_client.js grpc GRPC_ADDR READ_URL
//        Raw unary calls with @grpc/grpc-js: partial_success, an unknown
//        method (UNIMPLEMENTED), an undecodable message (INVALID_ARGUMENT),
//        one past --max-body 1M (RESOURCE_EXHAUSTED), gzip.
//   node otlp_client.js grpcburst GRPC_ADDR READ_URL REQUESTS SPANS CONCURRENCY
//        burst over gRPC: UNAVAILABLE with a RetryInfo, then accepted.
//   node otlp_client.js grpcbomb GRPC_ADDR MIB CALLS
//        CALLS gzip calls at once, each a valid request (one unknown field)
//        that inflates to MIB MiB, on a connection of its own: each answer
//        is OK or UNAVAILABLE with a RetryInfo; an UNAVAILABLE call is made
//        again after that delay (and a jitter) until OK; print JSON counts.
//   node otlp_client.js same MODE BASE_MS SEND_URL...
//        The same spans to every SEND_URL with MODE's exporter (proto,
//        proto-gzip, grpc, grpc-gzip, json...): the spans of emit() with ids
//        from a counter seeded by MODE and fixed times after BASE_MS + 2 h,
//        so that several collectors get byte-identical requests
//        (tests/integration/store_same_answers.sh compares their answers).
//
// Exit 0 when every check passed; each failure is printed to stderr.
'use strict';

const api = require('@opentelemetry/api');
const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } =
	require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { ProtobufTraceSerializer } = require('@opentelemetry/otlp-transformer');

let failures = 0;
function check(cond, what, got, want) {
	if (cond)
		return;
	failures++;
	console.error(`FAIL ${what}` + (got !== undefined ?
		`\n  got:  ${JSON.stringify(got)}\n  want: ${JSON.stringify(want)}` : ''));
}

function exporterFor(mode, url) {
	const gzip = mode.endsWith('-gzip') ? { compression: 'gzip' } : {};
	if (mode.startsWith('proto'))
		return new (require('@opentelemetry/exporter-trace-otlp-proto').OTLPTraceExporter)({ url, ...gzip });
	if (mode.startsWith('json'))
		return new (require('@opentelemetry/exporter-trace-otlp-http').OTLPTraceExporter)({ url, ...gzip });
	if (mode.startsWith('grpc'))
		return new (require('@opentelemetry/exporter-trace-otlp-grpc').OTLPTraceExporter)({ url, ...gzip });
	if (mode === 'zipkin')
		return new (require('@opentelemetry/exporter-zipkin').ZipkinExporter)({ url });
	throw new Error(`unknown mode ${mode}`);
}

// Spans of every kind, every attribute type, events, links, status.
function emit(service) {
	const mem = new InMemorySpanExporter();
	const provider = new BasicTracerProvider({
		resource: resourceFromAttributes({ 'service.name': service, 'host.name': 'test-host' }),
		spanProcessors: [new SimpleSpanProcessor(mem)],
	});
	const tracer = provider.getTracer('fay-otlp-test', '1.2.3');
	const K = api.SpanKind;
	const root = tracer.startSpan('GET /Checkout', {
		kind: K.SERVER,
		attributes: {
			'http.method': 'GET', 'http.status_code': 200, 'ratio': 0.25, 'cached': false,
			'big': 9007199254740991, 'neg': -42, 'pi': 3.141592653589793,
			'tags.str': ['a', 'b', 'with "quote"'], 'tags.int': [1, 2, 3],
			'tags.dbl': [1.5, 2.25], 'tags.bool': [true, false], 'empty.str': '',
			'unicode': 'héllo ✓',
		},
	});
	const rctx = api.trace.setSpan(api.context.active(), root);
	root.addEvent('received', { 'bytes': 512, 'peer': 'lb-1', 'ok': true });
	root.addEvent('plain');
	const client = tracer.startSpan('charge card', {
		kind: K.CLIENT, attributes: { 'peer.service': 'Bank', 'retry': 2 },
	}, rctx);
	client.setStatus({ code: api.SpanStatusCode.ERROR, message: 'card declined' });
	client.end();
	const producer = tracer.startSpan('publish order', { kind: K.PRODUCER }, rctx);
	producer.setStatus({ code: api.SpanStatusCode.OK });
	producer.end();
	const consumer = tracer.startSpan('consume order', {
		kind: K.CONSUMER, links: [{ context: producer.spanContext(), attributes: { 'l': 1 } }],
	}, rctx);
	consumer.setStatus({ code: api.SpanStatusCode.ERROR });
	consumer.end();
	const internal = tracer.startSpan('compute total', { kind: K.INTERNAL }, rctx);
	internal.setAttribute('items', ['x']);
	internal.end();
	root.end();
	return mem.getFinishedSpans();
}

// emit()'s kinds of spans, with fixed ids (a counter seeded by seed) and
// fixed times from t0_ms (hrtime pairs: microseconds survive).
function emitFixed(service, seed, t0_ms) {
	const mem = new InMemorySpanExporter();
	let n = 0;
	const hex = (v, len) => v.toString(16).padStart(len, '0');
	const provider = new BasicTracerProvider({
		resource: resourceFromAttributes({ 'service.name': service, 'host.name': 'test-host' }),
		spanProcessors: [new SimpleSpanProcessor(mem)],
		idGenerator: {
			generateTraceId: () => hex(seed, 16) + hex(++n, 16),
			generateSpanId: () => hex(seed * 4096 + ++n, 16),
		},
	});
	const tracer = provider.getTracer('fay-otlp-test', '1.2.3');
	const K = api.SpanKind;
	const at = us => {
		const total = t0_ms * 1000 + us;     // < 2^53
		return [Math.floor(total / 1e6), (total % 1e6) * 1000];
	};
	const out = [];
	for (let t = 0; t < 3; t++) {
		const base = t * 20e6;
		const root = tracer.startSpan(`GET /Checkout/${t}`, {
			kind: K.SERVER, startTime: at(base),
			attributes: { 'http.method': 'GET', 'http.status_code': 200 + t, 'ratio': 0.25,
				      'cached': false, 'tags.str': ['a', 'b'], 'tags.int': [1, 2, 3],
				      'http.path': '/api', 'environment': `prod${t}` },
		});
		const rctx = api.trace.setSpan(api.context.active(), root);
		root.addEvent('received', { 'bytes': 512, 'ok': true }, at(base + 100));
		const client = tracer.startSpan('charge card', {
			kind: K.CLIENT, startTime: at(base + 200),
			attributes: { 'peer.service': 'Bank', 'retry': 2 },
		}, rctx);
		if (t === 1)
			client.setStatus({ code: api.SpanStatusCode.ERROR, message: 'card declined' });
		client.end(at(base + 200 + 1500 * (t + 1)));
		const producer = tracer.startSpan('publish order', { kind: K.PRODUCER,
								    startTime: at(base + 5000) }, rctx);
		producer.setStatus({ code: api.SpanStatusCode.OK });
		producer.end(at(base + 5077));
		const consumer = tracer.startSpan('consume order', {
			kind: K.CONSUMER, startTime: at(base + 6000),
			links: [{ context: producer.spanContext(), attributes: { 'l': 1 } }],
		}, rctx);
		consumer.end(at(base + 6000 + 300 * t));
		root.end(at(base + 10000 + 1000 * t));
	}
	out.push(...mem.getFinishedSpans());
	return out;
}

// The same spans to every URL with mode's exporter.
async function same(mode, baseMs, urls) {
	const seeds = { proto: 1, 'proto-gzip': 2, grpc: 3, 'grpc-gzip': 4, json: 5, 'json-gzip': 6 };
	const seed = seeds[mode] || 7;
	const spans = emitFixed(`Same-${mode}`, seed, baseMs + 2 * 3600000 + seed * 60000);
	for (const url of urls) {
		const exporter = exporterFor(mode, url);
		const res = await exportAll(exporter, spans);
		check(res.code === 0, `${mode} to ${url}: export succeeded`,
		      res.error && String(res.error), 'success');
		await exporter.shutdown();
	}
	console.log(`${spans.length} spans in ${new Set(spans.map(s => s.spanContext().traceId)).size}` +
		    ` traces to ${urls.length} collectors`);
}

function ns(hr) {
	return BigInt(hr[0]) * 1000000000n + BigInt(hr[1]);
}

// An attribute value as OpenTelemetry's mapping to non-OTLP formats
// writes it: arrays as JSON, numbers in their shortest form.
function attrText(v) {
	return Array.isArray(v) ? JSON.stringify(v) : String(v);
}

// OpenTelemetry's Zipkin transformation of one span, as fay must store it.
function expectedZipkin(s, service) {
	const kinds = { 1: 'SERVER', 2: 'CLIENT', 3: 'PRODUCER', 4: 'CONSUMER' };
	const start = ns(s.startTime), end = ns(s.endTime);
	const tags = {};
	for (const [k, v] of Object.entries(s.attributes))
		tags[k] = attrText(v);
	tags['otel.scope.name'] = s.instrumentationScope.name;
	tags['otel.scope.version'] = s.instrumentationScope.version;
	if (s.status.code === api.SpanStatusCode.OK)
		tags['otel.status_code'] = 'OK';
	if (s.status.code === api.SpanStatusCode.ERROR) {
		tags['otel.status_code'] = 'ERROR';
		tags['error'] = s.status.message || 'true';
	}
	const z = {
		traceId: s.spanContext().traceId,
		id: s.spanContext().spanId,
		name: s.name.toLowerCase(),
		timestamp: Number(start / 1000n),
		duration: Math.max(1, Number((end - start) / 1000n)),
		localEndpoint: { serviceName: service.toLowerCase() },
		tags,
	};
	if (s.parentSpanContext)
		z.parentId = s.parentSpanContext.spanId;
	if (kinds[s.kind])
		z.kind = kinds[s.kind];
	if (s.attributes['peer.service'])
		z.remoteEndpoint = { serviceName: String(s.attributes['peer.service']).toLowerCase() };
	if (s.events.length)
		z.annotations = s.events.map(e => ({
			timestamp: Number(ns(e.time) / 1000n),
			value: e.attributes && Object.keys(e.attributes).length ?
				`${e.name}: ${JSON.stringify(e.attributes)}` : e.name,
		}));
	return z;
}

// What the Zipkin exporter itself sends, as Zipkin stores it (names lower case).
function expectedFromZipkinExporter(s, service) {
	const t = require('@opentelemetry/exporter-zipkin/build/src/transform');
	const z = JSON.parse(JSON.stringify(t.toZipkinSpan(s, service, 'otel.status_code', 'error')));
	z.name = z.name.toLowerCase();
	z.localEndpoint = { serviceName: z.localEndpoint.serviceName.toLowerCase() };
	if (z.remoteEndpoint)
		z.remoteEndpoint.serviceName = z.remoteEndpoint.serviceName.toLowerCase();
	if (!z.annotations || !z.annotations.length)
		delete z.annotations;
	if (!z.tags || !Object.keys(z.tags).length)
		delete z.tags;
	if (!z.parentId)
		delete z.parentId;
	if (!z.kind)
		delete z.kind;
	if (!z.duration)
		z.duration = 1;
	delete z.debug;
	delete z.shared;
	return z;
}

function sortAnn(a) {
	return a && [...a].sort((x, y) => x.timestamp - y.timestamp || (x.value < y.value ? -1 : 1));
}

function compareSpan(got, want, label) {
	if (!got) {
		check(false, `${label}: span ${want.id} (${want.name}) not stored`);
		return;
	}
	for (const f of ['traceId', 'id', 'parentId', 'name', 'kind', 'timestamp', 'duration'])
		check(got[f] === want[f], `${label}: span '${want.name}' ${f}`, got[f], want[f]);
	check(JSON.stringify(got.localEndpoint) === JSON.stringify(want.localEndpoint),
	      `${label}: span '${want.name}' localEndpoint`, got.localEndpoint, want.localEndpoint);
	check(JSON.stringify(got.remoteEndpoint) === JSON.stringify(want.remoteEndpoint),
	      `${label}: span '${want.name}' remoteEndpoint`, got.remoteEndpoint, want.remoteEndpoint);
	const gt = got.tags || {}, wt = want.tags || {};
	for (const k of new Set([...Object.keys(gt), ...Object.keys(wt)]))
		check(gt[k] === wt[k], `${label}: span '${want.name}' tag ${k}`, gt[k], wt[k]);
	check(JSON.stringify(sortAnn(got.annotations)) === JSON.stringify(sortAnn(want.annotations)),
	      `${label}: span '${want.name}' annotations`, got.annotations, want.annotations);
}

function exportAll(exporter, spans) {
	return new Promise(resolve => exporter.export(spans, resolve));
}

async function readTrace(readUrl, traceId, want) {
	let got = [];
	for (let i = 0; i < 50; i++) {
		const r = await fetch(`${readUrl}/api/v2/trace/${traceId}`);
		if (r.status === 200) {
			got = await r.json();
			if (got.length >= want)
				break;
		}
		await new Promise(res => setTimeout(res, 100));
	}
	return got;
}

async function roundtrip(mode, sendUrl, readUrl) {
	const service = `Node-${mode}`;
	const spans = emit(service);
	const exporter = exporterFor(mode, sendUrl);
	const res = await exportAll(exporter, spans);
	check(res.code === 0, `${mode}: export succeeded`, res.error && String(res.error), 'success');
	await exporter.shutdown();
	const traceId = spans[0].spanContext().traceId;
	const got = await readTrace(readUrl, traceId, spans.length);
	check(got.length === spans.length, `${mode}: ${spans.length} spans read back`, got.length,
	      spans.length);
	const byId = Object.fromEntries(got.map(z => [z.id, z]));
	for (const s of spans) {
		const want = mode === 'zipkin' ? expectedFromZipkinExporter(s, service) :
						  expectedZipkin(s, service);
		compareSpan(byId[want.id], want, mode);
	}
}

// Clone a finished span with another trace id / times (to make it invalid).
function variant(s, traceId, endTime) {
	const ctx = { ...s.spanContext(), traceId };
	return Object.assign(Object.create(Object.getPrototypeOf(s)), s, {
		spanContext: () => ctx, endTime: endTime || s.endTime, _spanContext: ctx,
	});
}

async function postProto(url, body) {
	const r = await fetch(url, { method: 'POST', body,
		headers: { 'Content-Type': 'application/x-protobuf' } });
	return { status: r.status, type: r.headers.get('content-type'),
		 retryAfter: r.headers.get('retry-after'),
		 body: new Uint8Array(await r.arrayBuffer()) };
}

async function partial(sendUrl, readUrl) {
	const spans = emit('partial-svc').slice(0, 1);
	const good = spans[0];
	const zero = variant(good, '00000000000000000000000000000000');
	const backwards = variant(good, 'ab'.repeat(16), [good.startTime[0] - 1, 0]);
	const body = ProtobufTraceSerializer.serializeRequest([zero, good, backwards]);
	const r = await postProto(sendUrl, body);
	check(r.status === 200, 'partial: 200', r.status, 200);
	check(/protobuf/.test(r.type || ''), 'partial: answered in protobuf', r.type,
	      'application/x-protobuf');
	const resp = ProtobufTraceSerializer.deserializeResponse(r.body);
	const ps = resp.partialSuccess || {};
	check(Number(ps.rejectedSpans) === 2, 'partial: rejected_spans', Number(ps.rejectedSpans), 2);
	check(/traceId: all zeros/.test(ps.errorMessage || ''), 'partial: error_message names the field',
	      ps.errorMessage, '... traceId: all zeros ...');
	const got = await readTrace(readUrl, good.spanContext().traceId, 1);
	check(got.length === 1 && got[0].id === good.spanContext().spanId,
	      'partial: the valid span is stored', got.length, 1);
}

// nreq protobuf requests of nspans spans each, a trace per request.
function burstRequests(nreq, nspans) {
	const base = emit('burst-svc')[0];
	const reqs = [];
	for (let i = 0; i < nreq; i++) {
		const tid = (i + 1).toString(16).padStart(8, '0') + 'b'.repeat(24);
		const spans = [];
		for (let k = 0; k < nspans; k++) {
			const s = variant(base, tid);
			const ctx = { ...s.spanContext(), spanId: (k + 1).toString(16).padStart(16, '0') };
			s.spanContext = () => ctx;
			spans.push(s);
		}
		reqs.push({ tid, body: ProtobufTraceSerializer.serializeRequest(spans) });
	}
	return reqs;
}

// The spans of these requests' traces in the store.
async function storedSpans(readUrl, reqs) {
	let n = 0;
	for (const q of reqs) {
		const r = await fetch(`${readUrl}/api/v2/trace/${q.tid}`);
		if (r.status === 200)
			n += (await r.json()).length;
	}
	return n;
}

async function burst(sendUrl, readUrl, nreq, nspans, conc) {
	const reqs = burstRequests(nreq, nspans);
	const out = { sent: nreq * nspans, accepted: 0, refused: 0, retryAfter: 0, other: 0,
		      retried: 0, stored: 0 };
	const refused = [];
	let next = 0;
	async function worker() {
		while (next < reqs.length) {
			const q = reqs[next++];
			const r = await postProto(sendUrl, q.body);
			if (r.status === 200) {
				out.accepted += nspans;
			} else if (r.status === 429 || r.status === 503) {
				out.refused += nspans;
				if (r.retryAfter && Number(r.retryAfter) > 0)
					out.retryAfter++;
				refused.push(q);
			} else {
				out.other++;
			}
		}
	}
	await Promise.all(Array.from({ length: conc }, worker));
	// What was refused is not stored; what was accepted is, exactly.
	out.stored = await storedSpans(readUrl, reqs);
	check(out.other === 0, 'burst: every answer is 200, 429 or 503', out.other, 0);
	check(out.refused > 0, 'burst: the ingest queue overflowed (429/503 seen)', out.refused, '> 0');
	check(out.retryAfter * nspans === out.refused, 'burst: every refusal carries Retry-After',
	      out.retryAfter * nspans, out.refused);
	check(out.sent === out.stored + out.refused, 'burst: sent == stored + rejected',
	      out.sent, `${out.stored} + ${out.refused}`);
	// After the burst, the refused requests are accepted (one at a time).
	await new Promise(res => setTimeout(res, 1000));
	for (const q of refused) {
		const r = await postProto(sendUrl, q.body);
		if (r.status === 200)
			out.retried += nspans;
	}
	check(out.retried === out.refused, 'burst: refused requests accepted after the burst',
	      out.retried, out.refused);
	console.log(JSON.stringify(out));
}

const EXPORT = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

// A unary call: {code, details, metadata, value}.
function grpcCall(client, path, body, opts = {}) {
	return new Promise(resolve => {
		client.makeUnaryRequest(path, b => b, b => b, Buffer.from(body),
			new (require('@grpc/grpc-js').Metadata)(), opts, (err, value) => resolve(err ?
				{ code: err.code, details: err.details, metadata: err.metadata } :
				{ code: 0, value }));
	});
}

// Fields of a protobuf message: [[number, wiretype, value]] (values of
// length-delimited fields as Buffers, varints as Numbers).
function pbFields(buf) {
	const out = [];
	let i = 0;
	const varint = () => {
		let v = 0, m = 1;
		for (;;) {
			const b = buf[i++];
			v += (b & 0x7f) * m;
			m *= 128;
			if (!(b & 0x80))
				return v;
		}
	};
	while (i < buf.length) {
		const key = varint(), f = Math.floor(key / 8), wt = key & 7;
		if (wt === 0)
			out.push([f, wt, varint()]);
		else if (wt === 2) {
			const n = varint();
			out.push([f, wt, buf.subarray(i, i + n)]);
			i += n;
		} else if (wt === 1) {
			i += 8;
		} else if (wt === 5) {
			i += 4;
		} else {
			throw new Error(`wire type ${wt}`);
		}
	}
	return out;
}

// The RetryInfo delay (seconds) in a grpc-status-details-bin, or -1.
function retryDelay(md) {
	const bin = md && md.get('grpc-status-details-bin')[0];
	if (!bin)
		return -1;
	for (const [f, , any] of pbFields(bin)) {
		if (f !== 3)
			continue;
		const a = pbFields(any);
		const url = a.find(x => x[0] === 1), val = a.find(x => x[0] === 2);
		if (url && String(url[2]) === 'type.googleapis.com/google.rpc.RetryInfo' && val) {
			const d = pbFields(val[2]).find(x => x[0] === 1);
			const secs = d ? pbFields(d[2]).find(x => x[0] === 1) : null;
			return secs ? secs[2] : 0;
		}
	}
	return -1;
}

function grpcClient(addr, gzip) {
	const grpc = require('@grpc/grpc-js');
	// OTLP_CA: TLS, the server's certificate checked against that CA file;
	// OTLP_KEY and OTLP_CERT: this client's own (mutual TLS)
	const fs = require('fs'), e = process.env;
	const creds = e.OTLP_CA ?
		grpc.credentials.createSsl(fs.readFileSync(e.OTLP_CA),
					   e.OTLP_KEY ? fs.readFileSync(e.OTLP_KEY) : null,
					   e.OTLP_CERT ? fs.readFileSync(e.OTLP_CERT) : null) :
		grpc.credentials.createInsecure();
	// a connection of its own (grpc-js shares one per target by default)
	return new grpc.Client(addr, creds,
		{ 'grpc.use_local_subchannel_pool': 1,
		  ...(gzip ? { 'grpc.default_compression_algorithm': 2 } : {}) });
}

async function grpcChecks(addr, readUrl) {
	const trace = process.env.OTLP_TRACE ? m => console.error(m) : () => {};
	const S = require('@grpc/grpc-js').status;
	const client = grpcClient(addr), gz = grpcClient(addr, true);
	const good = emit('grpc-raw').slice(0, 1)[0];
	const zero = variant(good, '00000000000000000000000000000000');
	trace('step 1');
	let r = await grpcCall(client, EXPORT, ProtobufTraceSerializer.serializeRequest([zero, good]));
	check(r.code === 0, 'grpc: a request with one invalid span: OK', r.code, 0);
	const ps = r.value ? ProtobufTraceSerializer.deserializeResponse(r.value).partialSuccess || {} : {};
	check(Number(ps.rejectedSpans) === 1 && /traceId: all zeros/.test(ps.errorMessage || ''),
	      'grpc: partial_success rejected_spans 1 with the reason', ps, { rejectedSpans: 1 });
	const got = await readTrace(readUrl, good.spanContext().traceId, 1);
	check(got.length === 1, 'grpc: the valid span stored', got.length, 1);
	trace('step 2');
	r = await grpcCall(client, '/opentelemetry.proto.collector.trace.v1.TraceService/Nope', Buffer.alloc(0));
	check(r.code === S.UNIMPLEMENTED, 'grpc: an unknown method: UNIMPLEMENTED', r.code, S.UNIMPLEMENTED);
	trace('step 3');
	r = await grpcCall(client, EXPORT, Buffer.from('\x0a\x05\x0a', 'latin1'));
	check(r.code === S.INVALID_ARGUMENT && /runs past the end/.test(r.details || ''),
	      'grpc: a truncated message: INVALID_ARGUMENT with the reason', [r.code, r.details],
	      S.INVALID_ARGUMENT);
	trace('step 4');
	r = await grpcCall(client, EXPORT, Buffer.alloc(2 << 20, 0));
	check(r.code === S.RESOURCE_EXHAUSTED, 'grpc: a message past --max-body: RESOURCE_EXHAUSTED',
	      [r.code, r.details], S.RESOURCE_EXHAUSTED);
	check(retryDelay(r.metadata) === -1, 'grpc: ... without RetryInfo (not retryable)',
	      retryDelay(r.metadata), -1);
	// gzip: 3 MB of zeros inside a small compressed message, past 1M after inflating
	trace('step 5');
	r = await grpcCall(gz, EXPORT, Buffer.concat([Buffer.from([0x0a, 0x00]), Buffer.alloc(3 << 20, 0)]));
	check(r.code === S.RESOURCE_EXHAUSTED && /after gzip decoding/.test(r.details || ''),
	      'grpc: gzip message past --max-body after inflating: RESOURCE_EXHAUSTED',
	      [r.code, r.details], S.RESOURCE_EXHAUSTED);
	const second = emit('grpc-gzip').slice(0, 1)[0];
	trace('step 6');
	r = await grpcCall(gz, EXPORT, ProtobufTraceSerializer.serializeRequest([second]));
	check(r.code === 0, 'grpc: a gzip-compressed request: OK', [r.code, r.details], 0);
	client.close();
	gz.close();
}

async function grpcBomb(addr, mib, calls) {
	const S = require('@grpc/grpc-js').status;
	const n = mib << 20;
	// field 15, length-delimited, n - 5 zero bytes (a 4-byte length varint)
	const body = Buffer.alloc(n, 0);
	const len = n - 5;
	body[0] = 0x7a;
	body[1] = len & 0x7f | 0x80;
	body[2] = len >> 7 & 0x7f | 0x80;
	body[3] = len >> 14 & 0x7f | 0x80;
	body[4] = len >> 21 & 0x7f;
	const out = { first: {}, final: {}, maxTries: 0, noRetryInfo: 0 };
	async function one() {
		const client = grpcClient(addr, true);
		let r, tries = 0;
		do {
			if (tries)
				await new Promise(res => setTimeout(res, 1000 * Math.max(retryDelay(r.metadata), 1) +
								     Math.random() * 1000));
			r = await grpcCall(client, EXPORT, body);
			if (!tries)
				out.first[r.code] = (out.first[r.code] || 0) + 1;
			if (r.code === S.UNAVAILABLE && retryDelay(r.metadata) < 0)
				out.noRetryInfo++;
			tries++;
		} while (r.code === S.UNAVAILABLE && tries < 60);
		out.final[r.code] = (out.final[r.code] || 0) + 1;
		out.maxTries = Math.max(out.maxTries, tries);
		if (r.code)
			console.error(`grpcbomb: ${r.code} ${r.details}`);
		client.close();
	}
	await Promise.all(Array.from({ length: calls }, one));
	const firstOk = Object.keys(out.first).every(c => c == 0 || c == S.UNAVAILABLE);
	check(firstOk, 'grpcbomb: every first answer OK or UNAVAILABLE', out.first, 'OK|UNAVAILABLE');
	check(!out.noRetryInfo, 'grpcbomb: each UNAVAILABLE with a RetryInfo', out.noRetryInfo, 0);
	check(out.final[0] === calls, 'grpcbomb: every call OK in the end', out.final, calls);
	console.log(JSON.stringify(out));
}

async function grpcBurst(addr, readUrl, nreq, nspans, conc) {
	const S = require('@grpc/grpc-js').status;
	const reqs = burstRequests(nreq, nspans);
	const out = { sent: nreq * nspans, accepted: 0, refused: 0, retryInfo: 0, other: 0,
		      retried: 0, stored: 0 };
	const refused = [];
	const clients = Array.from({ length: conc }, () => grpcClient(addr));
	let next = 0;
	async function worker(client) {
		while (next < reqs.length) {
			const q = reqs[next++];
			const r = await grpcCall(client, EXPORT, q.body);
			if (r.code === 0) {
				out.accepted += nspans;
			} else if (r.code === S.UNAVAILABLE) {
				out.refused += nspans;
				if (retryDelay(r.metadata) > 0)
					out.retryInfo++;
				refused.push(q);
			} else {
				out.other++;
				console.error(`grpc burst: ${r.code} ${r.details}`);
			}
		}
	}
	await Promise.all(clients.map(worker));
	out.stored = await storedSpans(readUrl, reqs);
	check(out.other === 0, 'grpc burst: every answer is OK or UNAVAILABLE', out.other, 0);
	check(out.refused > 0, 'grpc burst: the ingest queue overflowed (UNAVAILABLE seen)',
	      out.refused, '> 0');
	check(out.retryInfo * nspans === out.refused, 'grpc burst: every UNAVAILABLE carries RetryInfo',
	      out.retryInfo * nspans, out.refused);
	check(out.sent === out.stored + out.refused, 'grpc burst: sent == stored + rejected',
	      out.sent, `${out.stored} + ${out.refused}`);
	await new Promise(res => setTimeout(res, 1000));
	for (const q of refused) {
		const r = await grpcCall(clients[0], EXPORT, q.body);
		if (r.code === 0)
			out.retried += nspans;
	}
	check(out.retried === out.refused, 'grpc burst: refused requests accepted after the burst',
	      out.retried, out.refused);
	clients.forEach(c => c.close());
	console.log(JSON.stringify(out));
}

// One export per token ('-': none): the gRPC status each gets, as JSON
// {token: {code, details}} (the auth tests).
async function grpcAuth(addr, tokens) {
	const grpc = require('@grpc/grpc-js');
	const client = grpcClient(addr);
	const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(emit('grpc-raw').slice(0, 1)));
	const out = {};
	for (const t of tokens) {
		const md = new grpc.Metadata();
		if (t !== '-')
			md.set('authorization', 'Bearer ' + t);
		out[t] = await new Promise(resolve => client.makeUnaryRequest(EXPORT, b => b, b => b,
			body, md, {}, err => resolve(err ? { code: err.code, details: err.details } :
						     { code: 0 })));
	}
	client.close();
	console.log(JSON.stringify(out));
}

async function main() {
	const [cmd, ...a] = process.argv.slice(2);
	if (cmd === 'roundtrip')
		await roundtrip(a[0], a[1], a[2]);
	else if (cmd === 'partial')
		await partial(a[0], a[1]);
	else if (cmd === 'burst')
		await burst(a[0], a[1], Number(a[2]), Number(a[3]), Number(a[4]));
	else if (cmd === 'grpc')
		await grpcChecks(a[0], a[1]);
	else if (cmd === 'grpcauth')
		await grpcAuth(a[0], a.slice(1));
	else if (cmd === 'same')
		await same(a[0], Number(a[1]), a.slice(2));
	else if (cmd === 'grpcbomb')
		await grpcBomb(a[0], Number(a[1]), Number(a[2]));
	else if (cmd === 'grpcburst')
		await grpcBurst(a[0], a[1], Number(a[2]), Number(a[3]), Number(a[4]));
	else
		throw new Error('usage: otlp_client.js roundtrip|partial|burst|grpc|grpcauth|grpcburst|grpcbomb|same ...');
	process.exit(failures ? 1 : 0);
}

main().catch(e => {
	console.error(e);
	process.exit(2);
});
