// SPDX-License-Identifier: MIT
// Zipkin's own UI, Lens (built from openzipkin/zipkin's zipkin-lens with
// npm, LENS_DIR), in a real browser against fay: a small server here gives
// Lens what zipkin-server would (its files under /zipkin/, /zipkin/config.json
// with zipkin-server's defaults) and forwards /zipkin/api/v2/* to fay's
// /api/v2/* untouched.  Every API call Lens makes while it searches, offers
// tag values, opens Zipkin's TestObjects trace and draws the dependency
// graph must succeed.
//
// env: URL (fay collector), LENS_DIR (zipkin-lens/build), IMG_DIR, TRACE_JSON
import { createServer } from 'node:http';
import { readFileSync, existsSync, statSync, mkdirSync } from 'node:fs';
import { join, extname, normalize } from 'node:path';
import { post, launch, newPage, session, ok } from './lib.mjs';

const URL = process.env.URL, LENS = process.env.LENS_DIR, IMG = process.env.IMG_DIR;
mkdirSync(IMG, { recursive: true });
const trace = JSON.parse(readFileSync(process.env.TRACE_JSON, 'utf8'));
const tid = trace[0].traceId;
await post(URL, trace);

const calls = [];   // every API call Lens made: "STATUS PATH"
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
	'.svg': 'image/svg+xml', '.png': 'image/png', '.ico': 'image/x-icon', '.woff2': 'font/woff2', '.woff': 'font/woff' };
// zipkin-server's /zipkin/config.json with its defaults (ZipkinUiProperties)
const config = { environment: '', queryLimit: 10, defaultLookback: 900000, searchEnabled: true,
	dependency: { enabled: true, lowErrorRate: 0.5, highErrorRate: 0.75 } };
const server = createServer(async (req, res) => {
	const u = new globalThis.URL(req.url, 'http://x');
	if (u.pathname.startsWith('/zipkin/api/v2/')) {
		let status = 0, body = '', type = 'text/plain';
		try {
			const r = await fetch(URL + u.pathname.slice(7) + u.search);
			status = r.status;
			type = r.headers.get('content-type') || type;
			body = Buffer.from(await r.arrayBuffer());
		} catch (e) {
			status = 502;
			body = String(e);
		}
		calls.push(`${status} ${u.pathname}${u.search}`);
		res.writeHead(status, { 'Content-Type': type });
		res.end(body);
		return;
	}
	if (u.pathname === '/zipkin/config.json') {
		res.writeHead(200, { 'Content-Type': 'application/json' });
		res.end(JSON.stringify(config));
		return;
	}
	let f = join(LENS, normalize(u.pathname.replace(/^\/zipkin\/?/, '/')));
	if (!f.startsWith(LENS) || !existsSync(f) || statSync(f).isDirectory()) f = join(LENS, 'index.html');
	res.writeHead(200, { 'Content-Type': types[extname(f)] || 'application/octet-stream' });
	res.end(readFileSync(f));
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const S = `http://127.0.0.1:${server.address().port}`;

const { context, close } = await launch();
const pg = await newPage(context, IMG);
const { page, shot } = pg;
const T = { timeout: 15000 };
const waitCall = (re) => page.waitForResponse((r) => re.test(r.url()), T);

await session('the Lens session ran to the end', pg, async () => { await close(); server.close(); }, async () => {
	await page.goto(`${S}/zipkin/?serviceName=frontend&lookback=1h&limit=10`);
	let r = waitCall(/\/api\/v2\/traces\?/);
	await page.getByRole('button', { name: /run query/i }).click(T);
	const tr = await r;
	const found = await tr.json();
	ok(tr.status() === 200 && found.length === 1 && found[0][0].traceId === tid,
		'Lens searches serviceName=frontend and gets the TestObjects trace', JSON.stringify(found).slice(0, 300));
	await page.waitForTimeout(1000);
	await shot('lens-discover');

	// a tag criterion with a configured key: Lens asks for its values
	await page.click('[data-testid=add-button]', T);
	r = waitCall(/\/api\/v2\/autocompleteValues\?key=http\.path/);
	await page.fill('[data-testid=criterion-input]', 'http.path=', T);
	const vals = await r;
	const v = await vals.json();
	ok(vals.status() === 200 && v.includes('/api'), 'Lens offers the http.path values fay kept', JSON.stringify(v));
	await shot('lens-autocomplete');

	r = waitCall(new RegExp(`/api/v2/trace/${tid}`));
	await page.goto(`${S}/zipkin/traces/${tid}`);
	ok((await r).status() === 200, 'Lens opens the trace');
	await page.getByText('query', { exact: false }).first().waitFor(T);
	ok(await page.getByText('backend', { exact: false }).count() > 0, 'its page shows the backend service');
	await shot('lens-trace');

	const now = Date.now();
	await page.goto(`${S}/zipkin/dependency?endTs=${now}&startTs=${now - 86400000 * 2}`);
	r = waitCall(/\/api\/v2\/dependencies\?/);
	await page.getByRole('button', { name: /run query/i }).click(T);
	const deps = await (await r).json();
	ok(deps.some((l) => l.parent === 'frontend' && l.child === 'backend') &&
		deps.some((l) => l.parent === 'backend' && l.child === 'db' && l.errorCount === 1),
		'Lens draws the dependency graph from fay\'s links', JSON.stringify(deps));
	await page.waitForTimeout(1000);
	await shot('lens-dependencies');

	const paths = [...new Set(calls.map((c) => c.replace(/^\d+ /, '').replace(/\?.*/, '')))];
	for (const p of ['/zipkin/api/v2/services', '/zipkin/api/v2/autocompleteKeys',
		'/zipkin/api/v2/autocompleteValues', '/zipkin/api/v2/traces'])
		ok(paths.includes(p), `Lens called ${p}`, paths.join(' '));
	const failed = calls.filter((c) => !/^2\d\d /.test(c));
	ok(calls.length > 0 && failed.length === 0, `no failing API call (${calls.length} calls)`, ...failed);
	console.log('# ' + [...new Set(calls)].join('\n# '));
});
