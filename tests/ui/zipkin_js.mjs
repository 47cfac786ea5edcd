// SPDX-License-Identifier: MIT
// The official Zipkin JS tracer (npm zipkin + zipkin-transport-http)
// records a small distributed call and posts it to the collector's
// /api/v2/spans in Zipkin's own JSON_V2 encoding; the spans are read back
// through the query API and compared with what the tracer made.
// env: URL
import { createRequire } from 'node:module';
import { ok, done } from './lib.mjs';

const require = createRequire(import.meta.url);
const { Tracer, BatchRecorder, ExplicitContext, Annotation, InetAddress, jsonEncoder } = require('zipkin');
const { HttpLogger } = require('zipkin-transport-http');
const fetchImpl = require('node-fetch');
const URL = process.env.URL;

const errors = [];
// one recorder and transport per "process", as two services would have
function recorder() {
	const logger = new HttpLogger({ endpoint: URL + '/api/v2/spans', jsonEncoder: jsonEncoder.JSON_V2,
		fetchImplementation: fetchImpl, httpInterval: 100 });
	logger.on('error', (e) => errors.push(e));
	return new BatchRecorder({ logger });
}
const front = new Tracer({ ctxImpl: new ExplicitContext(), recorder: recorder(), localServiceName: 'js-frontend', traceId128Bit: true });
const back = new Tracer({ ctxImpl: new ExplicitContext(), recorder: recorder(), localServiceName: 'js-backend' });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// frontend: server span, then a client call to the backend (B3 propagation
// by hand, as an HTTP instrumentation would), the backend's server span
// with a tag and a custom annotation, and a local span.
const root = front.createRootId();
front.setId(root);
front.recordServiceName('js-frontend');
front.recordRpc('GET /checkout');
front.recordAnnotation(new Annotation.ServerRecv());
front.recordAnnotation(new Annotation.LocalAddr({ host: new InetAddress('127.0.0.1'), port: 8080 }));
front.recordBinary('http.path', '/checkout');
await sleep(5);
const child = front.createChildId();
front.setId(child);
front.recordServiceName('js-frontend');
front.recordRpc('POST /charge');
front.recordAnnotation(new Annotation.ClientSend());
front.recordAnnotation(new Annotation.ServerAddr({ serviceName: 'js-backend' }));
// the backend joins the same span id (shared, as Zipkin's B3 does)
back.setId(child);
back.recordServiceName('js-backend');
back.recordRpc('POST /charge');
back.recordAnnotation(new Annotation.ServerRecv());
back.recordBinary('charge.amount', '42');
await sleep(3);
back.recordMessage('card authorised');
await back.local('db write', () => sleep(4));
back.setId(child);
back.recordAnnotation(new Annotation.ServerSend());
await sleep(2);
front.setId(child);
front.recordAnnotation(new Annotation.ClientRecv());
front.setId(root);
front.recordAnnotation(new Annotation.ServerSend());

const traceId = root.traceId;
let spans = null;
for (let i = 0; i < 50 && !(spans && spans.length >= 4); i++) {
	await sleep(100);
	const r = await fetch(`${URL}/api/v2/trace/${traceId}`);
	if (r.ok) spans = await r.json();
}
ok(errors.length === 0, 'the transport reported no error', ...errors.map(String));
ok(spans && spans.length === 4, 'the trace is stored: 4 spans (server, client, shared server, local)', JSON.stringify(spans));
spans = spans || [];
const by = (svc, kind) => spans.find((s) => s.localEndpoint && s.localEndpoint.serviceName === svc && (s.kind || '') === kind);
const fs = by('js-frontend', 'SERVER'), fc = by('js-frontend', 'CLIENT'), bs = by('js-backend', 'SERVER'), bl = by('js-backend', '');
ok(fs && fs.name === 'get /checkout' && fs.tags['http.path'] === '/checkout' && fs.duration > 0 && !fs.parentId,
	'the frontend root span: name, tag, duration', JSON.stringify(fs));
ok(fs && fs.localEndpoint.ipv4 === '127.0.0.1' && fs.localEndpoint.port === 8080, 'with its endpoint', JSON.stringify(fs && fs.localEndpoint));
ok(fc && bs && fc.id === bs.id && fc.parentId === fs.id && bs.parentId === fs.id, 'client and server halves of the call share its span id', JSON.stringify([fc, bs]));
ok(fc && fc.remoteEndpoint && fc.remoteEndpoint.serviceName === 'js-backend', 'the client names its remote service');
ok(bs && bs.tags['charge.amount'] === '42' && (bs.annotations || []).some((a) => a.value === 'card authorised'),
	'the backend tag and annotation', JSON.stringify(bs));
ok(bl && bl.name === 'db write' && bl.parentId === bs.id && bl.duration >= 3000, 'the local span nests under the backend', JSON.stringify(bl));
ok(traceId.length === 32, '128-bit trace ids', traceId);

const sv = await (await fetch(`${URL}/api/v2/services`)).json();
ok(sv.includes('js-frontend') && sv.includes('js-backend'), 'both services are listed', JSON.stringify(sv));
const q = await (await fetch(`${URL}/api/v2/traces?serviceName=js-backend&annotationQuery=charge.amount%3D42`)).json();
ok(q.length === 1 && q[0].length === 4, 'a tag query finds the trace', JSON.stringify(q).slice(0, 200));
const deps = await (await fetch(`${URL}/api/v2/dependencies?endTs=${Date.now()}&lookback=600000`)).json();
ok(deps.some((d) => d.parent === 'js-frontend' && d.child === 'js-backend' && d.callCount === 1),
	'the call shows in the dependency graph', JSON.stringify(deps));
done();
