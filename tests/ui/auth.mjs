// SPDX-License-Identifier: MIT
// The web UI against a collector with tokens (--token-file), in Debian's
// chromium: the sign-in form on the first 401, an unknown token asked
// again with the server's reason, the token kept in sessionStorage across
// a reload, a token given in the URL's fragment (and removed from it), a
// read-only token refused the live query with the scope named.
//
// env: URL, READ (a read token), WRITE (a write token), IMG_DIR
import { mkdirSync } from 'node:fs';
import { makeTraces, launch, newPage, session, ok } from './lib.mjs';

const URL = process.env.URL, READ = process.env.READ, WRITE = process.env.WRITE;
const IMG = process.env.IMG_DIR;
mkdirSync(IMG, { recursive: true });

for (const t of makeTraces(12, 300)) {
	const r = await fetch(URL + '/api/v2/spans', { method: 'POST', body: JSON.stringify(t),
		headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + WRITE } });
	if (r.status !== 202) throw new Error(`POST /api/v2/spans: ${r.status} ${await r.text()}`);
}

const browser = await launch();
const pg = await newPage(browser.context, IMG);
const page = pg.page, T = { timeout: 10000 };

await session('the signed-in browser session ran to the end', pg, browser.close, async () => {
	await page.goto(URL + '/traces');
	await page.waitForSelector('#login', T);
	ok(await pg.count('.trace-row') === 0, 'without a token: the sign-in form, no traces');
	await pg.shot('auth-login');

	await page.fill('#login-token', 'not-a-token');
	await page.click('#login-go');
	await page.waitForSelector('#login-reason', T);
	ok(/unknown token/.test(await page.locator('#login-reason').textContent()),
		'an unknown token: asked again, with the server\'s reason',
		await page.locator('#login-reason').textContent());

	await page.fill('#login-token', READ);
	await page.click('#login-go');
	await page.waitForSelector('.trace-row', T);
	ok(await pg.count('.trace-row') === 12, 'with the read token: the 12 traces are listed', await pg.count('.trace-row'));
	ok(await page.evaluate(() => sessionStorage.getItem('fay.token')) === READ &&
	   await page.evaluate(() => localStorage.getItem('fay.token')) === null,
		'the token is in sessionStorage (not localStorage)');

	await page.reload();
	await page.waitForSelector('.trace-row', T);
	ok(await pg.count('#login') === 0, 'a reload of the tab: still signed in');

	await page.goto(URL + '/query');
	await page.waitForSelector('#q-text, textarea', T);
	await page.fill('#q-text', 'from s in syscall("read") select count()');
	await page.click('#q-run');
	await page.waitForFunction(() => /403/.test(document.body.innerText) ||
		/probe/.test(document.querySelector('#q-error')?.textContent || ''), null, T);
	ok(/'probe' scope/.test(await page.locator('#q-error').textContent()),
		'the live query with a read token: refused, the probe scope named',
		await page.locator('#q-error').textContent());

	// another tab of its own: sessionStorage is per tab
	const pg2 = await newPage(browser.context, IMG);
	await pg2.page.goto(URL + '/traces#token=' + encodeURIComponent(READ));
	await pg2.page.waitForSelector('.trace-row', T);
	ok(await pg2.count('#login') === 0, 'a token in the URL fragment: signed in, no form');
	ok(!pg2.page.url().includes('token='), 'the token is removed from the address bar', pg2.page.url());
	await pg2.page.close();
});
