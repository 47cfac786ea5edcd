// SPDX-License-Identifier: MIT
// The web UI in a real browser (Debian's chromium through playwright-core),
// against a real collector: search, open a waterfall, follow links, the
// dependency graph, a threshold cell turning red, a live query (error
// marker; streamed rows through the stand-in engine), hosts up and down.
// Screenshots of every page go to IMG_DIR.
//
// env: URL (fay collector), FAKEQ_URL (tests/fay-ui-fakeq collector),
//      IMG_DIR, AGENT_PID (a fay agent connected to URL's collector)
import { mkdirSync } from 'node:fs';
import { makeTraces, post, launch, newPage, session, ok } from './lib.mjs';

const URL = process.env.URL, FQ = process.env.FAKEQ_URL, IMG = process.env.IMG_DIR;
const AGENT_PID = +process.env.AGENT_PID || 0;
mkdirSync(IMG, { recursive: true });

const traces = makeTraces(40, 480);
for (const t of traces) await post(URL, t);
const slow = traces.filter((t) => t[0].duration >= 100e3).length;
const withErr = traces.filter((t) => t.some((s) => s.tags && s.tags.error)).length;

const { context, close } = await launch();
const pg = await newPage(context, IMG);
const { page, shot, count } = pg;
const T = { timeout: 10000 };

await session('the browser session ran to the end', pg, close, async () => {
	// ---- traces: search ----
	await page.goto(URL + '/');
	await page.waitForSelector('.trace-row', T);
	ok(await count('.trace-row') === 20, 'default search lists 20 traces (the limit)', await count('.trace-row'));
	ok(await page.locator('#nav a.active').textContent() === 'Traces', 'Traces is the active page');

	await page.selectOption('#q-service', 'osd');
	await page.waitForFunction(() => document.querySelectorAll('#q-span option').length > 1, null, T);
	await page.selectOption('#q-span', 'write');
	await page.fill('#q-min', '100ms');
	await page.fill('#q-limit', '50');
	await page.click('#q-go');
	await page.waitForFunction(() => /trace/.test(document.querySelector('#result-count')?.textContent || '') &&
		location.search.includes('minDuration=100000'), null, T);
	const slowCount = await count('.trace-row');
	ok(slowCount === slow, `service + span + min duration 100ms: ${slow} slow traces`, `got ${slowCount}`);
	ok(page.url().includes('serviceName=osd') && page.url().includes('spanName=write'),
		'the search is in the URL', page.url());

	await page.goto(URL + '/traces?annotationQuery=error&limit=50&lookback=3600000');
	await page.waitForSelector('#result-count', T);
	ok(await count('.trace-row.has-error') === withErr && await count('.trace-row') === withErr,
		`tag search 'error': ${withErr} traces, all marked`, await count('.trace-row'));

	await page.goto(URL + '/traces');
	await page.fill('#q-max', 'fast');
	await page.click('#q-go');
	await page.waitForSelector('.error-box', T);
	ok(/maxDuration: 'fast' is not a duration/.test(await page.locator('.error-box').textContent()),
		'a bad duration is refused with the reason');

	await page.goto(URL + '/traces?limit=12&lookback=3600000');
	await page.waitForSelector('.trace-row', T);
	await shot('traces');

	// ---- waterfall ----
	const first = page.locator('.trace-row').first();
	const tid = await first.getAttribute('data-trace');
	await first.click();
	await page.waitForSelector('#waterfall .wf-row', T);
	ok(new globalThis.URL(page.url()).pathname === '/trace/' + tid, 'a result opens /trace/ID', page.url());
	const nspans = await count('#waterfall .wf-row');
	ok(nspans === 9, 'the waterfall has a bar per span (9)', nspans);
	ok(await count('#waterfall .wf-row.crit') >= 3, 'the critical path is highlighted', await count('.wf-row.crit'));
	ok(await count('#waterfall .wf-tick') >= 6, 'annotations are ticks on the bars', await count('.wf-tick'));
	const depths = await page.$$eval('#waterfall .wf-row .wf-label', (ls) => ls.map((l) => parseInt(l.style.paddingLeft)));
	ok(Math.max(...depths) > Math.min(...depths) + 40, 'spans are nested (indented by depth)', depths.join(','));
	const mrow = page.locator('#waterfall .wf-row', { hasText: 'mapperd' }).filter({ hasText: 'server' }).first();
	await mrow.click();
	await page.waitForSelector('.span-details', T);
	const det = await page.locator('.span-details').textContent();
	ok(det.includes('object.id') && det.includes('lookup start'), 'a click shows the span\'s tags and annotations', det.slice(0, 200));
	await shot('trace');

	// follow a link: the service legend searches that service
	await page.click('.legend a:has-text("osd")');
	await page.waitForFunction(() => location.pathname === '/traces' && location.search.includes('serviceName=osd'), null, T);
	await page.waitForSelector('.trace-row', T);
	ok(await count('.trace-row') > 0, 'following a service link searches its traces');
	await page.goBack();
	await page.waitForSelector('#waterfall .wf-row', T);
	ok(await page.locator('#trace-id').textContent() === tid, 'back returns to the same trace');
	await page.goto(URL + '/trace/' + tid);
	await page.waitForSelector('#waterfall .wf-row', T);
	ok(await count('#waterfall .wf-row') === 9, 'the trace URL works when loaded directly (stable link)');
	await page.goto(URL + '/trace/00000000000000000000000000000bad');
	await page.waitForSelector('.error-box', T);
	ok(/404/.test(await page.locator('.error-box').textContent()), 'an unknown trace says 404');

	// ---- dependencies ----
	await page.goto(URL + '/dependencies');
	await page.waitForSelector('#deps-graph .dep-node', T);
	const nodes = await page.$$eval('#deps-graph .dep-node', (ns) => ns.map((n) => n.dataset.service).sort());
	ok(nodes.join() === 'browser,mapperd,osd,web', 'the graph has every service', nodes.join());
	const links = await page.$$eval('#deps-graph .dep-link', (ls) => ls.map((l) => l.dataset.parent + '>' + l.dataset.child).sort());
	ok(links.join() === 'browser>web,mapperd>osd,web>mapperd', 'and the calls between them', links.join());
	const row = await page.locator('#deps-table tr', { hasText: 'mapperd' }).filter({ hasText: 'osd' }).textContent();
	ok(row.includes(String(2 * 40)), 'mapperd -> osd: 80 calls counted', row);
	await shot('dependencies');

	// ---- dashboard and thresholds ----
	await page.goto(URL + '/dashboard');
	await page.waitForSelector('table.dash tbody tr', T);
	const p99 = () => page.locator('table.dash tr[data-key="osd/write"] td[data-metric="p99_us"]');
	ok(/none/.test(await p99().getAttribute('class')), 'no threshold: the cell is neither green nor red');
	await page.locator('table.dash tr[data-key="osd/write"] button').click();
	await page.locator('#th-editor tr.th-rule').last().locator('.th-p99').fill('5ms');
	await page.click('#th-save');
	await page.waitForFunction(() => /over/.test(document.querySelector('table.dash tr[data-key="osd/write"] td[data-metric="p99_us"]')?.className || ''), null, T);
	ok(true, 'p99 above a 5ms threshold: the cell turns red');
	const bg = await p99().evaluate((e) => getComputedStyle(e).backgroundColor);
	ok(bg === 'rgb(250, 220, 216)', 'and is painted red', bg);
	const saved = await (await fetch(URL + '/api/ui/thresholds')).json();
	ok(saved.rules.length === 1 && saved.rules[0].p99_us === 5000 && saved.rules[0].service === 'osd',
		'the rule was saved through the API', JSON.stringify(saved));
	await page.locator('#th-editor tr.th-rule').last().locator('.th-p99').fill('10s');
	await page.click('#th-add');
	const r2 = page.locator('#th-editor tr.th-rule').last();
	await r2.locator('.th-service').fill('web');
	await r2.locator('.th-p50').fill('1ms');
	await page.click('#th-save');
	await page.waitForFunction(() => /ok/.test(document.querySelector('table.dash tr[data-key="osd/write"] td[data-metric="p99_us"]')?.className || '') &&
		/over/.test(document.querySelector('table.dash tr[data-key="web/get /object"] td[data-metric="p50_us"]')?.className || ''), null, T);
	ok(true, 'a 10s threshold turns it green; a rule for service web colours web\'s cells');
	await page.locator('#th-editor tr.th-rule').last().locator('.th-p50').fill('soon');
	await page.click('#th-save');
	await page.waitForFunction(() => /not a duration/.test(document.querySelector('#th-msg')?.textContent || ''), null, T);
	ok(true, 'a bad threshold is refused in the editor');
	await page.locator('#th-editor tr.th-rule').last().locator('.th-p50').fill('1ms');
	await page.locator('#th-editor tr.th-rule').first().locator('.th-p99').fill('20ms');
	await page.click('#th-save');
	await page.waitForFunction(() => /over/.test(document.querySelector('table.dash tr[data-key="osd/write"] td[data-metric="p99_us"]')?.className || ''), null, T);
	await page.waitForSelector('.chart-card .uplot, .chart-card svg', T);
	ok(await count('.chart-card') >= 5, 'a time-series chart per service and span', await count('.chart-card'));
	await page.waitForTimeout(300);
	await shot('dashboard');

	// ---- live query: error marker, not available yet ----
	await page.goto(URL + '/query');
	await page.fill('#q-text', 'from s in syscall("read")\nwhere s.bogus > 3\nselect count()');
	await page.click('#q-run');
	await page.waitForSelector('#q-error', T);
	const marker = await page.locator('#q-gutter .err').getAttribute('data-line');
	ok(marker === '2', 'an error in the query is marked at its line', marker);
	const emsg = await page.locator('#q-error').textContent();
	ok(/^2:\d+: /.test(emsg) && emsg.includes('bogus'), 'with line:col and the message', emsg);
	await shot('query-error');
	if (process.getuid() === 0) {
		await page.fill('#q-text', 'from s in syscall("read")\ngroup s by s.comm into g\nselect { comm: g.key, calls: g.count() }\nfor 3s');
		await page.click('#q-run');
		await page.waitForSelector('tr.q-row', T);
		const live = await page.locator('#q-status').textContent();
		await page.waitForFunction(() => /^done/.test(document.querySelector('#q-status')?.textContent || ''), null, T);
		const comms = await page.$$eval('#q-table tbody tr td:first-child', (tds) => tds.map((t) => t.textContent));
		ok(/running… 1 probe attached/.test(live) && comms.length > 0,
			'a real query on this host: probes attach, rows fill in while it runs, then the final result', live, comms.join(','));
		await shot('query-live');
		await page.fill('#q-text', 'from s in syscall("read")\nselect { calls: count() }\nwindow 1s\nfor 4s');
		await page.click('[data-view="time series"]');
		await page.click('#q-run');
		await page.waitForFunction(() => /^done: .* in [34] windows/.test(document.querySelector('#q-status')?.textContent || ''), null, T);
		await page.waitForSelector('#q-series .uplot', T);
		ok(true, 'a real windowed query draws a time series');
		await shot('query-series');
		await page.click('[data-view="table"]');
		// categorize: a category column and the categories of the last window
		await page.fill('#q-text', 'from s in tracepoint("raw_syscalls:sys_enter")\ngroup s by {comm: s.comm, call: s.id} into g\nselect { comm: g.comm, call: g.call, n: g.count() }\ncategorize comm by call into 3\nwindow 1s for 3s');
		await page.click('#q-run');
		await page.waitForFunction(() => /^done/.test(document.querySelector('#q-status')?.textContent || ''), null, T);
		const head = await page.$$eval('#q-table thead th', (ths) => ths.map((t) => t.textContent));
		const catCells = await page.$$eval('#q-table tbody td.q-cat', (tds) => tds.map((t) => t.textContent));
		const catRows = await count('#q-cats tbody tr');
		ok(head[head.length - 1] === 'category' && catCells.length > 0 && catCells.every((t) => /^[1-3]/.test(t)) &&
			catRows >= 1 && catRows <= 3,
			'categorize: every row shows its category, and a table of the categories follows', head.join(','), catCells.slice(0, 5).join(','), catRows);
		await shot('query-categorize');
	}
	// ---- live query: rows stream in (stand-in engine) ----
	await page.goto(FQ + '/query');
	await page.fill('#q-text', 'from s in syscall("read")\ngroup s by s.comm into g\nselect { comm: g.key, calls: g.count() }');
	await page.click('#q-run');
	await page.waitForSelector('tr.q-row', T);
	const early = await count('tr.q-row');
	const running = await page.locator('#q-status').textContent();
	await page.waitForFunction(() => /^done: 12 rows/.test(document.querySelector('#q-status')?.textContent || ''), null, T);
	const late = await count('tr.q-row');
	ok(early < late && /running/.test(running), 'rows arrive while the query runs', `first seen ${early} (${running}), at the end ${late}`);
	ok(late === 12, 'all 12 streamed rows are in the table', late);
	await shot('query-standin');
	await page.click('[data-view="histogram"]');
	ok(await count('#q-hist rect') === 12, 'the histogram view draws a bar per row', await count('#q-hist rect'));
	await page.fill('#q-text', 'from s in syscall("read")\nselect { calls: count() }\nwindow 1s');
	await page.click('[data-view="time series"]');
	await page.click('#q-run');
	await page.waitForFunction(() => /^done/.test(document.querySelector('#q-status')?.textContent || ''), null, T);
	await page.waitForSelector('#q-series .uplot, #q-series p', T);
	ok(await count('#q-series .uplot') === 1, 'window results draw a time series');
	await shot('query-standin-series');

	// ---- hosts ----
	if (AGENT_PID) {
		await page.goto(URL + '/hosts');
		await page.waitForSelector('#hosts-table tbody tr', T);
		const up = await page.locator('#hosts-table tbody tr[data-agent]').first();
		ok(/up/.test(await up.getAttribute('class')), 'the connected agent is up');
		const txt = await up.textContent();
		ok(/\d+\.\d+/.test(txt), 'with its version', txt);
		await page.waitForSelector('#otlp-table tbody tr[data-sender="127.0.0.1"]', T);
		const snd = (await page.locator('#otlp-table tbody tr[data-sender="127.0.0.1"] td').allTextContents()).map((x) => x.trim());
		ok(snd[2] === '1' && snd[3] === '1', 'the OTLP sender with 1 span stored and 1 rejected', snd);
		await shot('hosts');
		process.kill(AGENT_PID, 'SIGTERM');
		let down = false;
		for (let i = 0; i < 40 && !down; i++) {
			await page.waitForTimeout(250);
			await page.reload();
			await page.waitForSelector('#hosts-table tbody tr', T);
			down = /down/.test(await page.locator('#hosts-table tbody tr[data-agent]').first().getAttribute('class'));
		}
		ok(down, 'a stopped agent shows down');
	}

});
