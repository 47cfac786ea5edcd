// SPDX-License-Identifier: MIT
// The flight recorder's pages in a real browser (Debian's chromium
// through playwright-core) against a real collector and agent alpha
// whose flight buffer holds the unsampled traces T1 (N1 spans) and T2
// (N2 spans) and ALL unsampled spans in all (tests/ui/ui_captures.sh):
// capture by trace id on /captures and its row in the list; a rule from
// the form, an error in one, dropping it; a trace id looked up on
// /traces that is not stored: "capture it" on its page; "capture the
// last N s" on /hosts.
//
// env: URL (fay collector), IMG_DIR, T1, N1, T2, N2, ALL
import { mkdirSync } from 'node:fs';
import { launch, newPage, session, ok } from './lib.mjs';

const { URL, IMG_DIR: IMG, T1, T2 } = process.env;
const N1 = Number(process.env.N1), N2 = Number(process.env.N2), ALL = Number(process.env.ALL);
mkdirSync(IMG, { recursive: true });

const { context, close } = await launch();
const pg = await newPage(context, IMG);
const { page, shot } = pg;
page.on('dialog', (d) => d.accept());
const T = { timeout: 30000 };

await session('the captures pages', pg, close, async () => {
	// ---- capture by trace id ----
	await page.goto(URL + '/captures');
	await page.waitForSelector('#cap-none', T);
	ok(await page.locator('#nav a.active').textContent() === 'Captures', 'Captures is the active page');
	ok(true, 'no capture yet: the list says so');
	await page.fill('#cap-trace', T1);
	await page.click('#cap-by-trace');
	await page.waitForSelector('#cap-result', T);
	const res = await page.locator('#cap-result').textContent();
	ok(new RegExp(`: ${N1} spans stored from 1 of 1 host`).test(res), `capture by id: ${N1} spans stored from 1 of 1 host`, res);
	const row = page.locator(`#cap-table tr.cap-row:has(a[href="/trace/${T1}"])`);
	await row.waitFor(T);
	ok(Number(await row.locator('.cap-stored').textContent()) === N1, 'the list shows the capture with its spans');
	ok(/1 of 1 host/.test(await row.textContent()) && await row.locator('.ok-text').count() === 1,
		'... and its completeness: 1 of 1 host, complete');
	await page.fill('#cap-trace', 'xyz');
	await page.click('#cap-by-trace');
	await page.waitForSelector('#cap-msg .error-box', T);
	ok(/trace_id/.test(await page.locator('#cap-msg').textContent()), 'a bad trace id: the collector\'s reason in an error box');

	// ---- a capture rule ----
	await page.fill('#cap-rule-name', 'ui_bad');
	await page.fill('#cap-rule-expr', 'sp.duration > > 1ms');
	await page.click('#cap-rule-add');
	await page.waitForSelector('#cap-rule-error', T);
	ok(/^rule:1:15: error/.test(await page.locator('#cap-rule-error').textContent()),
		'an error in a rule: shown with its line and column', await page.locator('#cap-rule-error').textContent());
	await page.fill('#cap-rule-name', 'ui_slow');
	await page.fill('#cap-rule-expr', 'sp.duration > 10s');
	await page.fill('#cap-rule-follow', '5s');
	await page.click('#cap-rule-add');
	await page.waitForSelector('#cap-rule-table tr[data-name="ui_slow"]', T);
	const rr = await page.locator('#cap-rule-table tr[data-name="ui_slow"]').textContent();
	ok(/sp\.duration > 10s/.test(rr) && /10\/s/.test(rr) && /5\.00s/.test(rr), 'the rule is listed with its predicate, budget and follow', rr);
	await page.waitForFunction(() => /yes/.test(document.querySelector('#cap-rule-table tr[data-name="ui_slow"]')?.textContent || ''), null, T);
	ok(true, 'the rule runs on the agent');
	await shot('captures');

	// ---- a trace not stored: looked up by id, captured from its page ----
	await page.goto(URL + '/traces');
	await page.fill('#q-trace-id', T2);
	await page.click('#q-trace-go');
	await page.waitForSelector('#cap-trace-go', T);
	ok(page.url().endsWith('/trace/' + T2), 'a trace id on the Traces page opens its page');
	ok(true, 'a trace not stored: its page offers to capture it');
	await page.click('#cap-trace-go');
	await page.waitForSelector('#cap-result', T);
	ok(new RegExp(`Captured ${N2} spans from 1 of 1 host`).test(await page.locator('#cap-result').textContent()),
		`"capture it": ${N2} spans from 1 of 1 host`, await page.locator('#cap-result').textContent());
	await shot('trace-capture');
	await page.click('#cap-result a');
	await page.waitForSelector('#span-count', T);
	ok(Number(await page.locator('#span-count').textContent()) === N2, `then the trace shows, ${N2} spans`);

	// ---- the Hosts page: the last N seconds ----
	await page.goto(URL + '/hosts');
	await page.fill('#hosts-cap-last', '10m');
	await page.click('#hosts-cap-go');
	await page.waitForSelector('#hosts-cap-msg .q-info', T);
	const hm = await page.locator('#hosts-cap-msg').textContent();
	ok(new RegExp(`^${ALL} spans stored from 1 of 1 host`).test(hm), `capture the last 10 min on /hosts: the ${ALL} unsampled spans`, hm);
	await shot('hosts-capture');

	// ---- the list again; drop the rule ----
	await page.goto(URL + '/captures');
	await page.waitForSelector('#cap-table', T);
	ok(await page.locator('#cap-table tr.cap-row').count() === 3, 'three captures listed');
	await page.click('#cap-rule-table tr[data-name="ui_slow"] .cap-drop');
	await page.waitForSelector('#cap-rules-none', T);
	ok(true, 'drop: "No capture rule"');
});
