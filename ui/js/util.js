// SPDX-License-Identifier: MIT
// fay UI: small helpers shared by the pages (no framework, no build step).
'use strict';

const U = (() => {
	// el('div', {class: 'x', onclick: f}, child, 'text', ...)
	function el(tag, attrs, ...kids) {
		const e = document.createElement(tag);
		for (const [k, v] of Object.entries(attrs || {})) {
			if (v === undefined || v === null || v === false) continue;
			if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
			else if (k === 'text') e.textContent = v;
			else e.setAttribute(k, v === true ? '' : v);
		}
		for (const k of kids.flat()) {
			if (k === undefined || k === null || k === false) continue;
			e.append(k instanceof Node ? k : document.createTextNode(String(k)));
		}
		return e;
	}

	const SVGNS = 'http://www.w3.org/2000/svg';
	function svg(tag, attrs, ...kids) {
		const e = document.createElementNS(SVGNS, tag);
		for (const [k, v] of Object.entries(attrs || {})) {
			if (v === undefined || v === null) continue;
			if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
			else if (k === 'text') e.textContent = v;
			else e.setAttribute(k, v);
		}
		for (const k of kids.flat()) if (k) e.append(k);
		return e;
	}

	// The API token, when the collector has tokens (--token-file): kept
	// in sessionStorage (this tab, until it is closed), asked for by a
	// sign-in form on the first 401, or given in the URL's fragment
	// (/#token=T: never sent to a server, removed from the address bar).
	const TOKEN_KEY = 'fay.token';
	(() => {
		const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
		if (!m) return;
		sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
		const rest = location.hash.replace(/(^#|&)token=[^&]*/, '$1').replace(/^#&?$/, '');
		history.replaceState(history.state, '', location.pathname + location.search + rest);
	})();

	function authHeaders() {
		const t = sessionStorage.getItem(TOKEN_KEY);
		return t ? { Authorization: 'Bearer ' + t } : {};
	}

	// Show the sign-in form (once, however many requests wait on it);
	// resolves when a token was entered.  reason: the server's answer.
	let signingIn = null;
	function login(reason) {
		if (signingIn) return signingIn;
		signingIn = new Promise((resolve) => {
			const input = el('input', { id: 'login-token', type: 'password', autocomplete: 'off',
				placeholder: 'token', 'aria-label': 'API token' });
			const form = el('form', { id: 'login', class: 'login' },
				el('h2', {}, 'Sign in'),
				el('p', {}, 'This collector needs a token (fay collector --token-file): ' +
					'one with the read scope to browse, write to save thresholds, ' +
					'probe to run queries.'),
				reason ? el('p', { id: 'login-reason', class: 'muted' }, reason) : null,
				input, el('button', { type: 'submit', id: 'login-go' }, 'Sign in'));
			form.addEventListener('submit', (ev) => {
				ev.preventDefault();
				const t = input.value.trim();
				if (!t) return;
				sessionStorage.setItem(TOKEN_KEY, t);
				form.remove();
				signingIn = null;
				resolve();
			});
			document.body.append(form);
			input.focus();
		});
		return signingIn;
	}

	function logout() {
		sessionStorage.removeItem(TOKEN_KEY);
	}

	class ApiError extends Error {
		constructor(status, text, body) {
			super(text);
			this.status = status;
			this.body = body;
		}
	}

	// fetch JSON; throws ApiError with the server's reason on a non-2xx.
	async function api(path, opts = {}) {
		const headers = opts.headers;
		let r = await fetch(path, Object.assign({}, opts,
			{ headers: Object.assign({}, headers, authHeaders()) }));
		while (r.status === 401) {
			await login((await r.text()).trim());
			r = await fetch(path, Object.assign({}, opts,
				{ headers: Object.assign({}, headers, authHeaders()) }));
		}
		const text = await r.text();
		let body = null;
		try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
		if (!r.ok) {
			const msg = (body && (body.error || body.message)) || text.trim() || r.statusText;
			throw new ApiError(r.status, msg, body);
		}
		return body;
	}

	// Microseconds as the largest sensible unit: 1.25s, 37.1ms, 512µs.
	function dur(us) {
		if (us === null || us === undefined || isNaN(us)) return '–';
		if (us >= 60e6) return (us / 60e6).toFixed(1) + 'min';
		if (us >= 1e6) return (us / 1e6).toFixed(us >= 10e6 ? 1 : 2) + 's';
		if (us >= 1e3) return (us / 1e3).toFixed(us >= 100e3 ? 0 : us >= 10e3 ? 1 : 2) + 'ms';
		return Math.round(us) + 'µs';
	}

	// "10ms", "2s", "500us", "1500" (µs) -> microseconds; NaN if not one.
	function parseDur(s) {
		const m = /^\s*(\d+(?:\.\d+)?)\s*(us|µs|ms|s|m|min)?\s*$/.exec(s || '');
		if (!m) return NaN;
		const mult = { us: 1, 'µs': 1, ms: 1e3, s: 1e6, m: 60e6, min: 60e6 }[m[2] || 'us'];
		return Math.round(parseFloat(m[1]) * mult);
	}

	function time(ms) {
		const d = new Date(ms);
		const p = (n, w = 2) => String(n).padStart(w, '0');
		return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
			`${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
	}

	function ago(ms) {
		const s = Math.max(0, (Date.now() - ms) / 1000);
		if (s < 60) return Math.round(s) + 's ago';
		if (s < 3600) return Math.round(s / 60) + 'min ago';
		if (s < 86400) return Math.round(s / 3600) + 'h ago';
		return Math.round(s / 86400) + 'd ago';
	}

	// A stable colour per service name: a hue from its hash, in one of
	// three lightness bands, so neighbouring names rarely look alike.
	function colour(name) {
		let h = 2166136261;
		for (const ch of name || '') h = Math.imul(h ^ ch.charCodeAt(0), 16777619);
		h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b);       // murmur3's finaliser
		h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35);
		h ^= h >>> 16; h >>>= 0;
		return `hsl(${h % 360} ${55 + (h >>> 9) % 3 * 10}% ${38 + (h >>> 11) % 3 * 6}%)`;
	}

	function chip(service) {
		return el('span', { class: 'chip', style: `--c:${colour(service)}` }, service || '?');
	}

	// GET path as JSON into a page: the data, or null after putting the
	// error in box.
	async function load(path, box) {
		try {
			return await api(path);
		} catch (e) {
			box.replaceChildren(errorBox(e));
			return null;
		}
	}

	// A plain SVG line chart (when uPlot is not in the build): xs, and
	// series [{data, stroke, dash}] (null: no point); fmt labels the top.
	// A line chart without uPlot: one y scale per distinct s.scale (the
	// first labelled on the left, a second on the right), fmt(max, scale)
	// printing the top of each.
	function svgLines(xs, series, w, h, fmt, id) {
		const scales = [...new Set(series.map((s) => s.scale || ''))].sort();
		const maxOf = new Map(scales.map((sc) => [sc, Math.max(1e-9,
			...series.filter((s) => (s.scale || '') === sc).flatMap((s) => s.data).filter((v) => v !== null))]));
		const x0 = xs[0], x1 = xs[xs.length - 1], right = scales.length > 1 ? 50 : 10;
		const root = svg('svg', { width: w, height: h, class: 'mini-chart', id });
		for (const s of series) {
			const max = maxOf.get(s.scale || '');
			let d = '';
			s.data.forEach((v, i) => {
				if (v === null) return;
				const x = 40 + (w - 40 - right) * (xs[i] - x0) / (x1 - x0 || 1), y = h - 20 - (h - 30) * v / max;
				d += (d ? 'L' : 'M') + x.toFixed(1) + ',' + y.toFixed(1);
			});
			root.append(svg('path', { d, fill: 'none', stroke: s.stroke, 'stroke-width': 1.5, 'stroke-dasharray': s.dash ? '4 3' : null }));
		}
		scales.slice(0, 2).forEach((sc, k) => root.append(svg('text', k ? { x: w - 2, y: 12, class: 'axis', 'text-anchor': 'end' } : { x: 2, y: 12, class: 'axis' },
			fmt(maxOf.get(sc), sc))));
		return root;
	}

	function go(path) {
		history.pushState(null, '', path);
		window.dispatchEvent(new Event('fay:navigate'));
	}

	function errorBox(e) {
		return el('div', { class: 'error-box', role: 'alert' },
			e && e.status ? `${e.status}: ${e.message}` : String(e && e.message || e));
	}

	return { el, svg, api, load, svgLines, ApiError, dur, parseDur, time, ago, colour, chip, go,
		errorBox, authHeaders, login, logout };
})();
