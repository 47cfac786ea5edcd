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

async function burst(sendUrl, readUrl, nreq, nspans, conc) {
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
	for (const q of reqs) {
		const r = await fetch(`${readUrl}/api/v2/trace/${q.tid}`);
		if (r.status === 200)
			out.stored += (await r.json()).length;
	}
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

async function main() {
	const [cmd, ...a] = process.argv.slice(2);
	if (cmd === 'roundtrip')
		await roundtrip(a[0], a[1], a[2]);
	else if (cmd === 'partial')
		await partial(a[0], a[1]);
	else if (cmd === 'burst')
		await burst(a[0], a[1], Number(a[2]), Number(a[3]), Number(a[4]));
	else
		throw new Error('usage: otlp_client.js roundtrip|partial|burst ...');
	process.exit(failures ? 1 : 0);
}

main().catch(e => {
	console.error(e);
	process.exit(2);
});
