// SPDX-License-Identifier: MIT
// The trace page's profile of the request's own threads in a real
// browser (Debian's chromium through playwright-core), against the
// collector, agent and standing query "cpu" of tests/ui/ui_trace_profile.sh:
// the page of TRACE draws the samples tied to it as a flame graph (as
// many as the store holds for it: SAMPLES), span_profile's spin among
// its frames; QUIET's page says it has none; with the query dropped, the
// page says how to keep one.  The query's own page (/queries/cpu) draws
// every sample of its kept windows (TOTAL) as one flame graph.
//
// env: URL (fay collector), IMG_DIR, TRACE, QUIET, SAMPLES, TOTAL
import { mkdirSync } from 'node:fs';
import { launch, newPage, session, ok } from './lib.mjs';

const { URL, IMG_DIR: IMG, TRACE, QUIET, SAMPLES, TOTAL } = process.env;
mkdirSync(IMG, { recursive: true });

const { context, close } = await launch();
const pg = await newPage(context, IMG);
const { page, shot } = pg;
const T = { timeout: 30000 };

const frames = () => page.evaluate(() => [...document.querySelectorAll('#trace-profile .fg-frame')]
	.map((g) => ({ name: g.dataset.name, value: Number(g.dataset.value) })));

await session('the trace page profile', pg, close, async () => {
	await page.goto(URL + '/trace/' + TRACE);
	await page.waitForSelector('#waterfall', T);
	await page.waitForSelector('#trace-profile .tp-flame, #trace-profile .tp-empty, #tp-none', T);
	const box = page.locator('#trace-profile .tp-flame');
	ok(await box.count() === 1, 'the trace page has a flame graph of the standing query "cpu"');
	ok(await box.getAttribute('data-query') === 'cpu', 'named after its query');
	const n = Number(await box.getAttribute('data-samples'));
	ok(n === Number(SAMPLES), `it draws the trace's own samples: ${n} (the store has ${SAMPLES})`);
	const f = await frames();
	const root = f.find((x) => x.name === 'all');
	ok(root && root.value === n, 'the root frame holds them all', JSON.stringify(f.slice(0, 5)));
	ok(f.some((x) => /^spin/.test(x.name)), "span_profile's spin is among its frames",
		f.map((x) => x.name).join(','));
	ok(!f.some((x) => /^\d+$/.test(x.name)), 'the trace id column is not drawn as a frame');
	await page.locator('#trace-profile').scrollIntoViewIfNeeded();
	await shot('trace-profile');

	await page.goto(URL + '/trace/' + QUIET);
	await page.waitForSelector('#trace-profile .tp-flame, #trace-profile .tp-empty', T);
	ok(await page.locator('#trace-profile .tp-empty').count() === 1,
		'a request no sample fell in: "No samples of this trace"');

	await page.goto(URL + '/queries/cpu');
	await page.waitForSelector('#sq-flame #fg-svg', T);
	const all = await page.evaluate(() => Number(document.querySelector('#sq-flame .fg-frame[data-name="all"]')?.dataset.value));
	ok(all === Number(TOTAL), `the standing query's page: one flame graph of all its kept samples (${all} of ${TOTAL})`);
	await shot('standing-flame');

	const r = await fetch(URL + '/api/queries/cpu', { method: 'DELETE' });
	ok(r.status === 200, 'DELETE /api/queries/cpu');
	await page.goto(URL + '/trace/' + TRACE);
	await page.waitForSelector('#trace-profile #tp-none', T);
	ok(/--keep/.test(await page.locator('#tp-none').textContent()),
		'with no such query, the page says how to keep one');
	await shot('trace-profile-none');
});
