// SPDX-License-Identifier: MIT
// The cluster pages in a real browser (Debian's chromium through
// playwright-core) against a real collector with two real agents, alpha
// and beta, and the standing query "ppid" (getppid calls per host, 1 s
// windows) that tests/ui/ui_cluster.sh kept: the standing queries list
// and a query's chart and latest window; keeping a query from the form
// (and an error in one, marked); dropping from the list; the Hosts page's
// query connections with the probes each host attached; a live query run
// "on the cluster" with each window's completeness.
//
// env: URL (fay collector), IMG_DIR
import { mkdirSync } from 'node:fs';
import { launch, newPage, session, ok } from './lib.mjs';

const URL = process.env.URL, IMG = process.env.IMG_DIR;
mkdirSync(IMG, { recursive: true });

const { context, close } = await launch();
const pg = await newPage(context, IMG);
const { page, shot, count } = pg;
page.on('dialog', (d) => d.accept());
const T = { timeout: 15000 };

await session('the cluster pages', pg, close, async () => {
	// ---- the list ----
	await page.goto(URL + '/queries');
	await page.waitForSelector('#sq-table tr[data-name="ppid"]', T);
	ok(await page.locator('#nav a.active').textContent() === 'Standing queries', 'Standing queries is the active page');
	ok(/cluster\.syscall\("getppid"\)/.test(await page.locator('tr[data-name="ppid"] .sq-query').textContent()),
		'the list shows the query text');
	await page.waitForFunction(() => /2 of 2 hosts/.test(document.querySelector('tr[data-name="ppid"]')?.textContent || ''), null, T);
	ok(true, 'its latest window: 2 of 2 hosts answered');
	await shot('queries');

	// ---- one query: chart and latest window ----
	await page.click('tr[data-name="ppid"] a');
	await page.waitForFunction(() => location.pathname === '/queries/ppid', null, T);
	await page.waitForSelector('#sq-rows tbody tr', T);
	const hosts = await page.locator('#sq-rows tbody tr td:first-child').allTextContents();
	ok(hosts.sort().join(',') === 'alpha,beta', 'the latest window has a row per host', hosts.join(','));
	const calls = (await page.locator('#sq-rows tbody tr td:nth-child(2)').allTextContents()).map(Number);
	ok(calls.length === 2 && calls.every((n) => n > 0), 'each row counts getppid calls', calls.join(','));
	ok(/2 of 2 hosts/.test(await page.locator('#sq-complete').textContent()), 'the window says 2 of 2 hosts');
	const p99 = await page.locator('#sq-rows tbody tr td:nth-child(3)').allTextContents();
	ok(p99.length === 2 && p99.every((t) => /^[0-9.]+(µs|ms|s)$/.test(t)), 'a time column prints times', p99.join(','));
	// two points or more per line: wait for a third window, then a chart
	await page.waitForFunction(() => /([3-9]|\d\d+) windows kept/.test(document.querySelector('#sq-head')?.textContent || ''), null, T);
	await page.waitForSelector('#sq-chart canvas, #sq-chart svg', T);
	const legend = await page.locator('#sq-chart').textContent();
	ok(/host=alpha/.test(legend) && /host=beta/.test(legend), 'the chart has a line per host', legend.slice(0, 200));
	const axes = await page.locator('#sq-chart').getAttribute('data-axes');
	ok(axes === 'count,ns', 'counts and times get an axis each', axes);
	if (await page.locator('#sq-chart .uplot').count()) {
		// each y axis is wide enough for its labels as drawn (no "0,000"
		// cut off), and the time axis prints times
		const ys = await page.locator('#sq-chart').evaluate((b) => {
			const c = document.createElement('canvas').getContext('2d');
			return ['count', 'ns'].map((k) => {
				const y = JSON.parse(b.dataset['y' + k] || 'null');
				if (!y) return { k, missing: true };
				c.font = y.font;
				const wide = Math.max(...y.labels.map((l) => c.measureText(l).width));
				return { k, labels: y.labels, size: y.size, wide };
			});
		});
		for (const y of ys)
			ok(!y.missing && y.labels.length > 0 && y.wide + 15 <= y.size, `the ${y.k} axis fits its labels`, JSON.stringify(y));
		const ns = ys.find((y) => y.k === 'ns');
		ok(ns && ns.labels && ns.labels.every((l) => /^-?[0-9.]+(µs|ms|s|min)$/.test(l)), 'the time axis labels are times', JSON.stringify(ns));
		// the x axis ends at the last window, not past it
		const end = await page.waitForFunction(() => {
			const b = document.querySelector('#sq-chart');
			return b && b.dataset.xmax && Number(b.dataset.xmax) === Number(b.dataset.xlast) && b.dataset.xmax;
		}, null, T).then(() => true, () => false);
		const d = await page.locator('#sq-chart').evaluate((b) => `${b.dataset.xmax} vs ${b.dataset.xlast}`);
		ok(end, 'the x axis ends at the last window', d);
	}
	await shot('query-history');
	// a page reload keeps the route
	await page.reload();
	await page.waitForSelector('#sq-rows tbody tr', T);
	ok(true, '/queries/ppid reloads');
	await page.goto(URL + '/queries/nosuch');
	await page.waitForSelector('#sq-head .error-box', T);
	ok(/404/.test(await page.locator('#sq-head .error-box').textContent()), 'an unknown query: 404 in an error box');

	// ---- keep one from the form, with an error first ----
	await page.goto(URL + '/queries');
	await page.waitForSelector('#sq-table', T);
	await page.fill('#sq-name', 'hosts_n');
	await page.fill('#sq-text', 'from s in cluster.syscall("getppid")\ngroup s by s.host into g\nselect { host: g.key, n: g.bogus() }\nwindow 1s');
	await page.click('#sq-add');
	await page.waitForSelector('#sq-error', T);
	ok(/^3:/.test(await page.locator('#sq-error').textContent()), 'an error in the query is shown at its line',
		await page.locator('#sq-error').textContent());
	await page.fill('#sq-text', 'from s in cluster.syscall("getppid")\ngroup s by s.host into g\nselect { host: g.key, n: g.count() }\nwindow 1s');
	await page.click('#sq-add');
	await page.waitForSelector('#sq-table tr[data-name="hosts_n"]', T);
	ok(true, 'a query kept from the form is listed');
	const r = await (await fetch(URL + '/api/queries')).json();
	ok(r.some((q) => q.name === 'hosts_n'), 'and the collector has it');
	await shot('queries-kept');

	// ---- hosts: query connections and probes ----
	await page.goto(URL + '/hosts');
	await page.waitForSelector('#cluster-table tr[data-host="alpha"]', T);
	await page.waitForSelector('#cluster-table tr[data-host="beta"]', T);
	const probes = await page.locator('#cluster-table tr[data-host="alpha"] .cluster-q[data-state="attached"]').allTextContents();
	ok(probes.length === 2 && probes.every((p) => /tracepoint syscalls:sys_enter_getppid/.test(p)),
		'the Hosts page shows alpha\'s two queries with their attached probes', probes.join(' | '));
	ok(await count('#cluster-table tr[data-host="beta"] .cluster-q[data-state="attached"]') === 2, 'and beta\'s');
	await shot('hosts-cluster');

	// ---- hosts: coloured by a standing query that categorizes them ----
	// (both hosts share this machine's kernel: the same getppid mix, one
	// category of the two asked for)
	const cq = 'from s in cluster.syscall("getppid") group s by {host: s.host, cpu: s.cpu} into g\n' +
		'select { host: g.host, cpu: g.cpu, n: g.count() }\ncategorize host by cpu into 2 window 1s';
	const post = await fetch(URL + '/api/queries', { method: 'POST', headers: { 'Content-Type': 'application/json' },
		body: JSON.stringify({ name: 'hostcat', query: cq }) });
	ok(post.status === 200 || post.status === 201, 'a standing query that categorizes hosts is kept', post.status);
	await page.waitForFunction(async (u) => {
		const r = await (await fetch(u + '/api/queries')).json();
		const q = r.find((x) => x.name === 'hostcat');
		return q && q.last && q.last.categories && q.last.categories.length > 0;
	}, URL, T);
	await page.goto(URL + '/hosts');
	await page.waitForSelector('#host-categories .cat-box[data-query="hostcat"]', T);
	await page.waitForSelector('#hosts-table tbody tr[data-agent] .host-cat', T);
	const chips = await page.$$eval('#hosts-table tbody tr[data-agent]', (trs) => trs.map((tr) =>
		tr.children[1].textContent + '=' + (tr.querySelector('.host-cat')?.textContent || '')));
	ok(chips.length === 2 && chips.every((c) => /^(alpha|beta)=1/.test(c)),
		'the Hosts page colours each host by its category (alpha and beta alike: 1)', chips.join(','));
	const members = await page.locator('#host-categories tr[data-category="1"] td:nth-child(2)').textContent();
	ok(members === 'alpha beta', 'and lists each category with its members', members);
	await shot('hosts-categories');
	const del = await fetch(URL + '/api/queries/hostcat', { method: 'DELETE' });
	ok(del.status === 200 || del.status === 204, 'the categorizing query is dropped again', del.status);

	// ---- live query on the cluster ----
	await page.goto(URL + '/query');
	await page.fill('#q-text', 'from s in syscall("getppid")\ngroup s by s.host into g\nselect { host: g.key, calls: g.count() }\nwindow 1s for 3s');
	await page.check('#q-cluster');
	await page.click('#q-run');
	await page.waitForFunction(() => /^done/.test(document.querySelector('#q-status')?.textContent || ''), null, { timeout: 20000 });
	const st = await page.locator('#q-status').textContent();
	// 2 hosts x at least 2 whole windows (the last, cut by 'for', may be empty)
	ok(/done: ([4-9]|\d\d+) rows in [2-4] windows/.test(st), 'the cluster query ran its windows', st);
	ok(/2 of 2 hosts/.test(await page.locator('#q-hosts').textContent()), 'each window says 2 of 2 hosts',
		await page.locator('#q-hosts').textContent());
	await shot('query-cluster');
	// and without the box, a cluster. source runs on the cluster too
	await page.uncheck('#q-cluster');
	await page.fill('#q-text', 'from s in cluster.syscall("getppid")\ngroup s by s.host into g\nselect { host: g.key, calls: g.count() }\nfor 2s');
	await page.click('#q-run');
	await page.waitForFunction(() => /^done/.test(document.querySelector('#q-status')?.textContent || ''), null, { timeout: 20000 });
	ok(/2 of 2 hosts/.test(await page.locator('#q-hosts').textContent()), 'a cluster. source without the box: 2 of 2 hosts');
	const qh = await page.locator('#q-table tbody tr td:first-child').allTextContents();
	ok(qh.sort().join(',') === 'alpha,beta', 'its answer has a row per host', qh.join(','));
	const qc = (await page.locator('#q-table tbody tr td:nth-child(2)').allTextContents()).map(Number);
	ok(qc.length === 2 && qc.every((n) => n >= 100), 'each counts the 2 s of getppid calls (about 4000 on a quiet machine, some hundreds under load; >= 100)', qc.join(','));
	await shot('query-cluster-total');
	// a stream on the cluster: its rows, then its end's completeness (it
	// had none: the hosts line stayed empty)
	await page.fill('#q-text', 'from s in cluster.syscall("getppid")\nselect { host: s.host }\nlimit 5 for 10s');
	await page.click('#q-run');
	await page.waitForFunction(() => /^done/.test(document.querySelector('#q-status')?.textContent || ''), null, { timeout: 20000 });
	const ss = await page.locator('#q-status').textContent();
	ok(/^done: 5 rows/.test(ss), 'a cluster stream with limit 5: 5 rows', ss);
	ok(/2 of 2 hosts/.test(await page.locator('#q-hosts').textContent()), 'and its end says 2 of 2 hosts',
		await page.locator('#q-hosts').textContent());

	// ---- drop from the list ----
	await page.goto(URL + '/queries');
	await page.waitForSelector('#sq-table tr[data-name="ppid"]', T);
	await page.click('#sq-table tr[data-name="ppid"] .sq-drop');
	await page.waitForFunction(() => !document.querySelector('#sq-table tr[data-name="ppid"]'), null, T);
	ok(true, 'drop removes ppid from the list');
	await page.click('#sq-table tr[data-name="hosts_n"] .sq-drop');
	await page.waitForSelector('#sq-none', T);
	ok(true, 'dropping the last: "No standing query"');
});
