// SPDX-License-Identifier: MIT
// Shared by the UI tests: a realistic set of traces to seed a collector
// with, and Debian's chromium driven by playwright-core (never a
// downloaded browser).
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);

// A seeded PRNG so every run posts the same shapes.
function rng(seed) {
	let s = seed >>> 0;
	return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}
const hex = (r, n) => Array.from({ length: n }, () => Math.floor(r() * 16).toString(16)).join('');

// n traces over the last `spreadS` seconds: web -> mapperd -> osd x2 -> disk,
// Zipkin v2 JSON (client/server pairs, annotations, tags, some errors).
export function makeTraces(n = 40, spreadS = 480, seed = 7) {
	const r = rng(seed);
	const now = Date.now() * 1000;
	const traces = [];
	for (let i = 0; i < n; i++) {
		const tid = hex(r, 32);
		const t0 = Math.round(now - (spreadS * 1e6) * (i + 0.5) / n);
		const slow = i % 7 === 3;
		const err = i % 9 === 4;
		const spans = [];
		const root = hex(r, 16), cl = hex(r, 16), srv = hex(r, 16);
		const total = Math.round((slow ? 180e3 : 30e3) + r() * 20e3);
		spans.push({ traceId: tid, id: root, kind: 'SERVER', name: 'get /object', timestamp: t0, duration: total,
			localEndpoint: { serviceName: 'web', ipv4: '10.0.0.1', port: 8080 },
			remoteEndpoint: { serviceName: 'browser', ipv4: '10.0.9.9' },
			tags: Object.assign({ 'http.method': 'GET', 'http.path': '/object/' + i }, err ? { error: 'backend timeout' } : {}) });
		const c0 = t0 + 800, cdur = total - 1600;
		spans.push({ traceId: tid, id: cl, parentId: root, kind: 'CLIENT', name: 'map', timestamp: c0, duration: cdur,
			localEndpoint: { serviceName: 'web' }, remoteEndpoint: { serviceName: 'mapperd' } });
		spans.push({ traceId: tid, id: srv, parentId: cl, kind: 'SERVER', name: 'map', timestamp: c0 + 300, duration: cdur - 600,
			localEndpoint: { serviceName: 'mapperd', ipv4: '10.0.0.2', port: 6800 },
			annotations: [{ timestamp: c0 + 400, value: 'lookup start' }, { timestamp: c0 + 2400, value: 'lookup done' }],
			tags: { 'object.id': String(1000 + i) } });
		for (let k = 0; k < 2; k++) {
			const oc = hex(r, 16), os = hex(r, 16), dk = hex(r, 16);
			const s0 = c0 + 3000 + k * 500;
			const d = k === 1 && slow ? cdur - 5000 : Math.round(8e3 + r() * 10e3);
			spans.push({ traceId: tid, id: oc, parentId: srv, kind: 'CLIENT', name: 'write', timestamp: s0, duration: d,
				localEndpoint: { serviceName: 'mapperd' }, remoteEndpoint: { serviceName: 'osd' } });
			spans.push({ traceId: tid, id: os, parentId: oc, kind: 'SERVER', name: 'write', timestamp: s0 + 200, duration: d - 400,
				localEndpoint: { serviceName: 'osd', ipv4: '10.0.0.' + (3 + k) },
				tags: Object.assign({ 'osd.id': String(k) }, err && k === 1 ? { error: 'EIO' } : {}) });
			spans.push({ traceId: tid, id: dk, parentId: os, name: 'disk write', timestamp: s0 + 600, duration: d - 1400,
				localEndpoint: { serviceName: 'osd' },
				annotations: [{ timestamp: s0 + 700, value: 'submit' }, { timestamp: s0 + d - 900, value: 'complete' }] });
		}
		traces.push(spans);
	}
	return traces;
}

export async function post(url, spans) {
	const r = await fetch(url + '/api/v2/spans', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(spans) });
	if (r.status !== 202) throw new Error(`POST /api/v2/spans: ${r.status} ${await r.text()}`);
}

export async function launch(viewport = { width: 1360, height: 900 }) {
	const { chromium } = require('playwright-core');
	const dir = mkdtempSync(join(tmpdir(), 'fay-chromium-'));
	// A fresh profile directory per run (playwright passes --user-data-dir).
	const context = await chromium.launchPersistentContext(dir, {
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		headless: true,
		viewport,
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
			'--disable-background-networking', '--disable-component-update', '--disable-sync'],
	});
	const close = async () => { await context.close(); rmSync(dir, { recursive: true, force: true }); };
	return { context, close };
}

// A page that records script errors (errors[]), with shot(name) (a full
// page screenshot into imgDir) and count(selector).
export async function newPage(context, imgDir) {
	const errors = [];
	const page = await context.newPage();
	page.on('pageerror', (e) => errors.push(String(e)));
	page.on('console', (m) => { if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(m.text()); });
	const shot = (name) => page.screenshot({ path: `${imgDir}/${name}.png`, fullPage: true });
	const count = (sel) => page.locator(sel).count();
	return { page, errors, shot, count };
}

// Run a browser session's checks: an exception fails `what` (with a
// screenshot "failure"), script errors seen in the page fail the end;
// the browser is closed and the TAP plan printed whatever happens.
export async function session(what, pg, close, body) {
	try {
		await body();
		ok(pg.errors.length === 0, 'no script errors in the pages', ...pg.errors);
	} catch (e) {
		ok(false, what, e.stack || e);
		await pg.shot('failure').catch(() => {});
	} finally {
		await close();
		done();
	}
}

// TAP
let n = 0, failed = 0;
export function ok(cond, what, ...diag) {
	n++;
	if (cond) console.log(`ok ${n} - ${what}`);
	else {
		failed++;
		console.log(`not ok ${n} - ${what}`);
		for (const d of diag) console.log('#   ' + String(d).replace(/\n/g, '\n#   '));
	}
	return cond;
}
export function done() {
	console.log(`1..${n}`);
	process.exitCode = failed ? 1 : 0;
}
