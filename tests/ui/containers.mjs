// SPDX-License-Identifier: MIT
// Containers in the UI, in a real browser (Debian's chromium through
// playwright-core), against the collector and agent of
// tests/ui/ui_containers.sh, whose container web-1 runs the service
// ctr-web: the Hosts page's Containers column, its filter, the
// container's link to its traces, and a span's detail naming its
// container.
//
// env: URL (fay collector), IMG_DIR, N (the container's spans)
import { mkdirSync } from 'node:fs';
import { launch, newPage, session, ok } from './lib.mjs';

const URL = process.env.URL, IMG = process.env.IMG_DIR, N = Number(process.env.N);
mkdirSync(IMG, { recursive: true });

const { context, close } = await launch();
const pg = await newPage(context, IMG);
const { page, shot, count } = pg;
const T = { timeout: 30000 };
const visible = () => page.evaluate(() => [...document.querySelectorAll('#hosts-table tr[data-agent]')].filter((r) => !r.hidden).length);

await session('containers in the UI', pg, close, async () => {
	await page.goto(URL + '/hosts');
	await page.waitForSelector('#hosts-table .ctr[data-container="web-1"]', T);
	const cell = await page.locator('#hosts-table .ctr[data-container="web-1"]').textContent();
	ok(/web-1/.test(cell) && /ctr-web/.test(cell), 'the Hosts page lists container web-1 and its service ctr-web in the agent\'s row', cell);
	ok(await page.locator('#hosts-table thead th').nth(3).textContent() === 'Containers', 'a Containers column');
	await shot('containers-hosts');
	await page.fill('#container-filter', 'no-such-container');
	ok(await visible() === 0, 'the container filter hides a host without that container');
	await page.fill('#container-filter', 'web-1');
	ok(await visible() === 1, 'filtered by "web-1": the host is listed');
	await page.fill('#container-filter', 'ctr-web');
	ok(await visible() === 1, 'filtered by its service "ctr-web": listed too');
	await shot('containers-hosts-filtered');

	await page.click('#hosts-table .ctr[data-container="web-1"] a.chip');
	await page.waitForSelector('.trace-row', T);
	ok(await page.inputValue('#q-tags') === 'container.name=web-1', 'the container\'s link searches its tag', await page.inputValue('#q-tags'));
	ok(await count('.trace-row') === Math.min(N, 20), `its traces listed (${Math.min(N, 20)}: the page's limit)`, await count('.trace-row'));
	await page.click('.trace-row');
	await page.waitForSelector('.wf-row', T);
	await page.click('.wf-row');
	await page.waitForSelector('.span-details', T);
	const det = await page.locator('.span-details').textContent();
	ok(/container\s*web-1/.test(det), 'the span\'s detail names its container', det.slice(0, 300));
	ok(/container\.name\s*web-1/.test(det), 'and its tags hold container.name', det.slice(0, 300));
	await shot('containers-span');
});
