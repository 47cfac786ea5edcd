// SPDX-License-Identifier: MIT
// The live query page's flame graph in a real browser (Debian's chromium
// through playwright-core), against the collector and agents of
// tests/ui/ui_flame.sh, while "flamework" (stack_work spin: main;A;B;C
// does 9 units of work for each of main;A;D's 1) runs: a profile query
// grouped by s.ustack switches the page to the flame graph; B's frame is
// about 9 times D's; a click on B zooms (B spans the width, C above it);
// a search marks D's frames and gives their share; the same query "on
// the cluster" draws both hosts' stacks merged by name.
//
// env: URL (fay collector), IMG_DIR
import { mkdirSync } from 'node:fs';
import { launch, newPage, session, ok } from './lib.mjs';

const URL = process.env.URL, IMG = process.env.IMG_DIR;
mkdirSync(IMG, { recursive: true });

const { context, close } = await launch();
const pg = await newPage(context, IMG);
const { page, shot } = pg;
const T = { timeout: 30000 };
const Q = 'from s in profile(997)\nwhere s.comm == "flamework"\ngroup s by s.ustack into g\nselect { stack: g.key, samples: g.count() }\nfor 4s';

// the frames named `name` (all of them: one per stack path)
const frames = (name) => page.evaluate((n) => [...document.querySelectorAll('#fg-svg .fg-frame')]
	.filter((g) => g.dataset.name === n)
	.map((g) => ({ value: Number(g.dataset.value), width: Number(g.querySelector('rect').getAttribute('width')) })), name);
const sum = (a, k) => a.reduce((s, x) => s + x[k], 0);

async function run(cluster) {
	await page.goto(URL + '/query');
	await page.waitForSelector('#q-text', T);
	if ((await page.locator('#q-cluster').isChecked()) !== cluster) await page.click('#q-cluster');
	await page.fill('#q-text', Q);
	await page.click('#q-run');
	await page.waitForFunction(() => /^done/.test(document.querySelector('#q-status')?.textContent || ''), null, T);
	await page.waitForSelector('#fg-svg', T);
}

await session('the flame graph', pg, close, async () => {
	// ---- on the collector's host ----
	await run(false);
	ok(await page.locator('#q-view button.on').textContent() === 'flame graph',
		'a result grouped by a stack opens as a flame graph');
	let b = await frames('B'), d = await frames('D'), c = await frames('C');
	const ratio = sum(b, 'value') / Math.max(1, sum(b, 'value') + sum(d, 'value'));
	ok(b.length >= 1 && d.length >= 1 && c.length >= 1, 'frames main, A, B, C and D are drawn',
		JSON.stringify({ b, c, d }));
	// within 3 standard deviations of the share for the samples taken
	// (the program gets what CPU a loaded machine leaves it: 62 samples
	// in 4 s at 997 Hz in one run here), and never tighter than 0.035:
	// the workload's own split is not exactly 9:1 (0.921 and 0.924 of
	// ~3700 samples in two quiet CI runs; query_stacks.sh allows 0.05),
	// while a flame graph that counted B twice would show 0.947
	const n = sum(b, 'value') + sum(d, 'value'),
		tol = Math.max(0.035, 3 * Math.sqrt(0.09 / Math.max(1, n)));
	ok(n >= 30 && Math.abs(ratio - 0.9) <= tol,
		`B holds about 9 of every 10 samples of B and D (${ratio.toFixed(3)} of ${n}, within ${tol.toFixed(3)})`);
	ok(Math.abs(sum(b, 'width') / Math.max(1, sum(b, 'width') + sum(d, 'width')) - ratio) < 0.02,
		'widths are proportional to the samples');
	await shot('flame-host');

	// ---- zoom: a click on B ----
	await page.click('#fg-svg .fg-frame[data-name="B"]');
	b = await frames('B');
	c = await frames('C');
	d = await frames('D');
	ok(b.length === 1 && b[0].width > 955, 'a click on B zooms: B spans the whole width', JSON.stringify(b));
	ok(c.length === 1 && c[0].width > 900 && d.length === 0, 'above it only C, nearly as wide; D is out of view',
		JSON.stringify({ c, d }));
	ok(!(await page.locator('#fg-reset').isDisabled()), 'Reset zoom is enabled');
	await shot('flame-zoom');
	await page.click('#fg-reset');
	ok((await frames('D')).length >= 1, 'Reset zoom shows the whole graph again');

	// ---- search ----
	await page.fill('#fg-search', '^D$');
	await page.waitForSelector('#fg-svg .fg-hit', T);
	const hits = await page.locator('#fg-svg .fg-hit').evaluateAll((g) => g.map((x) => x.dataset.name));
	ok(hits.length >= 1 && hits.every((n) => n === 'D'), 'a search marks the matching frames', hits.join(','));
	const found = await page.locator('#fg-found').textContent();
	const pct = Number((/\(([\d.]+)%\)/.exec(found) || [])[1]);
	ok(pct > 3 && pct < 20, `and says their share of the samples (${found})`);
	await shot('flame-search');

	// ---- the cluster: both hosts' stacks, merged by name ----
	await run(true);
	const hosts = await page.locator('#q-hosts').textContent();
	ok(/2 of 2 hosts/.test(hosts), 'on the cluster: 2 of 2 hosts answered', hosts);
	b = await frames('B');
	ok(b.length === 1, 'one B frame: the hosts\' stacks merged by their names', JSON.stringify(b));
	await shot('flame-cluster');
});
