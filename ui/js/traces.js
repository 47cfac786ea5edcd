// SPDX-License-Identifier: MIT
// fay UI: trace search (Zipkin's /api/v2/traces) with duration bars.
// The form is mirrored in the URL (/traces?serviceName=...), so a search
// is a link too.  A trace id opens its page (/trace/ID), which offers to
// capture it from the hosts' flight buffers when it is not stored.
'use strict';

const Traces = (() => {
	const { el } = U;
	const lookbacks = [['5m', 300e3], ['15m', 900e3], ['1h', 3600e3], ['6h', 21600e3],
		['1d', 86400e3], ['7d', 604800e3]];

	// The root span (no parent in the trace), else the earliest.
	function root(spans) {
		const ids = new Set(spans.map((s) => s.id));
		const r = spans.filter((s) => !s.parentId || !ids.has(s.parentId));
		const pool = r.length ? r : spans;
		return pool.reduce((a, b) => ((a.timestamp || Infinity) <= (b.timestamp || Infinity) ? a : b));
	}

	function summary(spans) {
		const r = root(spans);
		let start = Infinity, end = 0, errors = 0;
		const svcs = new Map();
		for (const s of spans) {
			if (s.timestamp) {
				start = Math.min(start, s.timestamp);
				end = Math.max(end, s.timestamp + (s.duration || 0));
			}
			const n = (s.localEndpoint && s.localEndpoint.serviceName) || '?';
			svcs.set(n, (svcs.get(n) || 0) + 1);
			if (s.tags && 'error' in s.tags) errors++;
		}
		return {
			id: r.traceId, root: r, start: start === Infinity ? 0 : start,
			duration: r.duration || (end > start ? end - start : 0),
			spans: spans.length, services: svcs, errors,
		};
	}

	function field(label, input) {
		return el('label', { class: 'field' }, el('span', {}, label), input);
	}

	async function render(main) {
		const q = new URLSearchParams(location.search);
		const svc = el('select', { name: 'serviceName', id: 'q-service' }, el('option', { value: '' }, 'any service'));
		const name = el('select', { name: 'spanName', id: 'q-span' }, el('option', { value: '' }, 'any span'));
		const tags = el('input', { name: 'annotationQuery', id: 'q-tags', placeholder: 'error and http.method=GET', value: q.get('annotationQuery') || '' });
		const minD = el('input', { name: 'minDuration', id: 'q-min', placeholder: '10ms', size: 7, value: q.get('minDuration') ? U.dur(+q.get('minDuration')).replace('µs', 'us') : '' });
		const maxD = el('input', { name: 'maxDuration', id: 'q-max', placeholder: '2s', size: 7, value: q.get('maxDuration') ? U.dur(+q.get('maxDuration')).replace('µs', 'us') : '' });
		const lb = el('select', { name: 'lookback', id: 'q-lookback' },
			lookbacks.map(([t, ms]) => el('option', { value: ms, selected: String(ms) === (q.get('lookback') || '3600000') }, 'last ' + t)));
		const end = el('input', { type: 'datetime-local', id: 'q-end', step: 1 });
		if (q.get('endTs')) {
			const d = new Date(+q.get('endTs'));
			end.value = new Date(d - d.getTimezoneOffset() * 60e3).toISOString().slice(0, 19);
		}
		const limit = el('input', { name: 'limit', id: 'q-limit', type: 'number', min: 1, max: 1000, value: q.get('limit') || 20, size: 4 });
		const out = el('div', { id: 'results' });
		const form = el('form', { class: 'search', id: 'search' },
			field('Service', svc), field('Span name', name), field('Tags', tags),
			field('Min duration', minD), field('Max duration', maxD), field('Range', lb),
			field('Ending', end), field('Limit', limit),
			el('button', { type: 'submit', class: 'primary', id: 'q-go' }, 'Search'));
		const tid = el('input', { id: 'q-trace-id', placeholder: '16 or 32 hex digits', size: 34, class: 'mono' });
		const byId = el('form', { class: 'search', id: 'trace-by-id' }, field('Trace ID', tid),
			el('button', { type: 'submit', id: 'q-trace-go' }, 'Open'));
		byId.addEventListener('submit', (ev) => {
			ev.preventDefault();
			const id = tid.value.trim().toLowerCase();
			if (!/^([0-9a-f]{16}|[0-9a-f]{32})$/.test(id)) {
				out.replaceChildren(U.errorBox(`Trace ID: '${tid.value}' is not 16 or 32 hex digits`));
				return;
			}
			U.go('/trace/' + id);
		});
		main.append(el('h2', {}, 'Traces'), form, byId, out);

		async function loadNames() {
			name.replaceChildren(el('option', { value: '' }, 'any span'));
			if (!svc.value) return;
			const names = await U.api('/api/v2/spans?serviceName=' + encodeURIComponent(svc.value));
			for (const n of names) name.append(el('option', { value: n, selected: n === q.get('spanName') }, n));
		}
		svc.addEventListener('change', () => loadNames().catch((e) => out.replaceChildren(U.errorBox(e))));
		try {
			for (const s of await U.api('/api/v2/services'))
				svc.append(el('option', { value: s, selected: s === q.get('serviceName') }, s));
			await loadNames();
		} catch (e) {
			out.append(U.errorBox(e));
		}

		form.addEventListener('submit', (ev) => {
			ev.preventDefault();
			const p = new URLSearchParams();
			const bad = [];
			if (svc.value) p.set('serviceName', svc.value);
			if (name.value) p.set('spanName', name.value);
			if (tags.value.trim()) p.set('annotationQuery', tags.value.trim());
			for (const [k, inp] of [['minDuration', minD], ['maxDuration', maxD]]) {
				if (!inp.value.trim()) continue;
				const us = U.parseDur(inp.value);
				if (isNaN(us) || us <= 0) bad.push(`${k}: '${inp.value}' is not a duration (10ms, 500us, 2s)`);
				else p.set(k, us);
			}
			p.set('lookback', lb.value);
			if (end.value) p.set('endTs', new Date(end.value).getTime());
			p.set('limit', limit.value || 20);
			if (bad.length) {
				out.replaceChildren(U.errorBox(bad.join('; ')));
				return;
			}
			history.replaceState(null, '', '/traces?' + p);
			search(p, out);
		});
		if ([...q.keys()].length) search(q, out);
		else form.requestSubmit();
	}

	async function search(p, out) {
		out.replaceChildren(el('p', { class: 'muted' }, 'Searching…'));
		let traces;
		try {
			traces = await U.api('/api/v2/traces?' + p);
		} catch (e) {
			out.replaceChildren(U.errorBox(e));
			return;
		}
		const rows = traces.map(summary);
		const max = Math.max(1, ...rows.map((r) => r.duration));
		out.replaceChildren(el('p', { class: 'muted', id: 'result-count' },
			`${rows.length} trace${rows.length === 1 ? '' : 's'}`));
		const list = el('div', { class: 'trace-list' });
		for (const r of rows) {
			const rs = (r.root.localEndpoint && r.root.localEndpoint.serviceName) || '?';
			list.append(el('a', { class: 'trace-row' + (r.errors ? ' has-error' : ''), href: '/trace/' + r.id, 'data-trace': r.id },
				el('div', { class: 'trace-head' },
					el('span', { class: 'trace-name' }, U.chip(rs), ' ', r.root.name || '(unnamed)'),
					el('span', { class: 'trace-dur' }, U.dur(r.duration))),
				el('div', { class: 'bar-track' },
					el('div', { class: 'bar', style: `width:${Math.max(0.5, 100 * r.duration / max)}%;background:${U.colour(rs)}` })),
				el('div', { class: 'trace-meta' },
					el('span', {}, `${r.spans} spans`),
					r.errors ? el('span', { class: 'err-count' }, `${r.errors} errors`) : null,
					el('span', {}, [...r.services].map(([s, n]) => el('span', { class: 'svc-count' }, U.chip(s), ` ×${n} `))),
					el('span', { class: 'muted' }, U.time(r.start / 1000)),
					el('span', { class: 'muted mono' }, r.id))));
		}
		if (!rows.length) list.append(el('p', { class: 'muted' }, 'No trace matches. Widen the range or drop a filter.'));
		out.append(list);
	}

	return { render, summary };
})();
