// SPDX-License-Identifier: MIT
// fay UI: one trace as a waterfall.  Spans are bars on one time axis,
// nested under their parents, coloured by service; annotations are ticks
// on the bars; a click shows a span's tags and annotations; the critical
// path (the chain of spans the trace's end waited for) is highlighted;
// below, the profile of the request's own threads (profile()).
'use strict';

const Waterfall = (() => {
	const { el } = U;
	const svcOf = (s) => (s.localEndpoint && s.localEndpoint.serviceName) || '?';

	// Build the tree.  A SERVER half sharing its id with a CLIENT half is
	// the client's child; a child of a shared id hangs under the half of
	// its own service.
	function tree(spans) {
		const nodes = spans.map((s, i) => ({
			s, i, kids: [], parent: null, depth: 0, crit: false,
			start: s.timestamp || 0, end: (s.timestamp || 0) + (s.duration || 0),
		}));
		const byId = new Map();
		for (const n of nodes) {
			if (!byId.has(n.s.id)) byId.set(n.s.id, []);
			byId.get(n.s.id).push(n);
		}
		for (const n of nodes) {
			const s = n.s;
			let p = null;
			if (s.kind === 'SERVER' || s.kind === 'CONSUMER') {
				p = (byId.get(s.id) || []).find((o) => o !== n && (o.s.kind === 'CLIENT' || o.s.kind === 'PRODUCER'));
			}
			if (!p && s.parentId && byId.has(s.parentId)) {
				const cands = byId.get(s.parentId).filter((o) => o !== n);
				p = cands.find((o) => svcOf(o.s) === svcOf(s)) ||
					cands.find((o) => o.s.kind === 'SERVER') || cands[0] || null;
			}
			if (p) {
				n.parent = p;
				p.kids.push(n);
			}
		}
		// A cycle (bad data) would hide spans: break it at the first node seen twice.
		const roots = nodes.filter((n) => !n.parent);
		const order = [];
		const seen = new Set();
		const visit = (n, d) => {
			if (seen.has(n)) return;
			seen.add(n);
			n.depth = d;
			order.push(n);
			n.kids.sort((a, b) => a.start - b.start);
			for (const k of n.kids) visit(k, d + 1);
		};
		roots.sort((a, b) => a.start - b.start);
		for (const r of roots) visit(r, 0);
		for (const n of nodes) if (!seen.has(n)) visit(n, 0);
		return { nodes, roots, order };
	}

	// Mark the critical path below n, bounded by time `bound`: the child
	// that finished last, then the one that finished last before that one
	// started, and so on.  Children running in parallel with a critical
	// one (ending after it started) are not on the path.
	function critical(n, bound) {
		n.crit = true;
		let cursor = Math.min(n.end, bound);
		const kids = [...n.kids].sort((a, b) => b.end - a.end);
		let first = true;
		for (const k of kids) {
			if (cursor <= n.start) break;
			if (!first && k.end > cursor) continue;
			if (k.start >= cursor) continue;
			critical(k, cursor);
			cursor = k.start;
			first = false;
		}
	}

	function kv(table, k, v) {
		table.append(el('tr', {}, el('th', {}, k), el('td', {}, v)));
	}

	function details(n, t0) {
		const s = n.s;
		const t = el('table', { class: 'kv' });
		kv(t, 'service', U.chip(svcOf(s)));
		kv(t, 'name', s.name || '');
		if (s.kind) kv(t, 'kind', s.kind);
		kv(t, 'span id', el('span', { class: 'mono' }, s.id));
		if (s.parentId) kv(t, 'parent id', el('span', { class: 'mono' }, s.parentId));
		kv(t, 'start', `${U.time(s.timestamp / 1000)} (+${U.dur(s.timestamp - t0)})`);
		kv(t, 'duration', U.dur(s.duration));
		for (const [w, ep] of [['local', s.localEndpoint], ['remote', s.remoteEndpoint]]) {
			if (!ep) continue;
			kv(t, w + ' endpoint', [ep.serviceName, ep.ipv4 || ep.ipv6, ep.port].filter(Boolean).join(' · '));
		}
		// the container the recording process ran in (the agent's tags,
		// OpenTelemetry's keys): a link to its traces
		const ctr = s.tags && (s.tags['container.name'] ? ['container.name', s.tags['container.name']] :
			s.tags['container.id'] ? ['container.id', s.tags['container.id']] : null);
		if (ctr) kv(t, 'container', el('a', { class: 'ctr-link', href: '/traces?annotationQuery=' + encodeURIComponent(ctr.join('=')) + '&lookback=86400000&limit=20' },
			ctr[0] === 'container.id' ? ctr[1].slice(0, 12) : ctr[1]));
		if (s.shared) kv(t, 'shared', 'yes');
		if (n.crit) kv(t, 'critical path', 'yes');
		const box = el('div', { class: 'span-details', 'data-span': s.id }, t);
		const tags = Object.entries(s.tags || {});
		if (tags.length) {
			const tt = el('table', { class: 'kv tags' });
			for (const [k, v] of tags) kv(tt, k, v);
			box.append(el('h4', {}, 'Tags'), tt);
		}
		if ((s.annotations || []).length) {
			const at = el('table', { class: 'kv annotations' });
			for (const a of s.annotations) kv(at, '+' + U.dur(a.timestamp - t0), a.value);
			box.append(el('h4', {}, 'Annotations'), at);
		}
		return box;
	}

	// The profile of the request's own threads: the samples that standing
	// profile queries grouped by s.trace_id and a stack took while this
	// trace's spans were current on their threads (the collector keeps a
	// window's rows of this trace only: results?trace=ID), merged over
	// the stored windows and drawn as a flame graph per query.
	async function profile(id) {
		const box = el('section', { id: 'trace-profile' }, el('h3', {}, 'Profile of this request'));
		let qs;
		try {
			qs = (await U.api('/api/queries')).filter((q) => (q.columns || []).some((c) => c.trace) && Flame.fits(q.columns));
		} catch (e) {
			box.append(U.errorBox(e));
			return box;
		}
		if (!qs.length) {
			box.append(el('p', { class: 'muted', id: 'tp-none' },
				'No standing query samples CPU by trace. Keep one, e.g. ',
				el('code', {}, 'fay query --cluster URL --keep cpu \'from s in cluster.profile(99) where s.trace_id != 0 group s by {trace: s.trace_id, stack: s.ustack} into g select {trace: g.trace, stack: g.stack, n: g.count()} window 10s\''),
				', and the CPU samples taken while a request\'s spans ran on their threads show here.'));
			return box;
		}
		for (const q of qs) {
			let r;
			try {
				r = await U.api(`/api/queries/${encodeURIComponent(q.name)}/results?limit=100000&trace=${encodeURIComponent(id)}`);
			} catch (e) {
				box.append(U.errorBox(e));
				continue;
			}
			const t = r.columns.findIndex((c) => c.trace);
			const cols = r.columns.filter((c, i) => i !== t);
			const rows = [];
			for (const w of r.windows)
				for (const row of w.rows || []) rows.push(row.filter((v, i) => i !== t));
			const n = rows.reduce((a, row) => a + (Number(row[cols.findIndex((c, i) => c.type === 'int' && !c.key && !c.stack)]) || 0), 0);
			box.append(el('h4', {}, q.name, ' ', el('span', { class: 'muted mono' }, q.query)),
				rows.length ? el('div', { class: 'tp-flame', 'data-query': q.name, 'data-samples': n }, Flame.render(rows, cols))
					: el('p', { class: 'muted tp-empty' }, 'No samples of this trace in its stored windows.'));
		}
		return box;
	}

	async function render(main, id) {
		main.append(el('p', { class: 'muted' }, 'Loading trace…'));
		let spans;
		try {
			spans = await U.api('/api/v2/trace/' + encodeURIComponent(id));
		} catch (e) {
			const box = el('div', { id: 'cap-box' });
			// not stored: its spans may still be in the hosts' flight buffers
			main.replaceChildren(el('h2', {}, 'Trace ' + id), U.errorBox(e),
				e.status === 404 ? el('div', { class: 'toolbar' }, el('span', { class: 'muted' },
					'Not stored. The hosts may still hold it (FAY_RECORD=all, fay agent --flight): '),
				Captures.button(id, box)) : null, box,
				el('p', {}, el('a', { href: '/traces' }, '← back to the search')));
			return;
		}
		const { nodes, roots, order } = tree(spans);
		const timed = nodes.filter((n) => n.s.timestamp);
		const t0 = Math.min(...timed.map((n) => n.start));
		const t1 = Math.max(...timed.map((n) => n.end));
		const total = Math.max(1, t1 - t0);
		for (const r of roots) critical(r, Infinity);
		const svcs = [...new Set(nodes.map((n) => svcOf(n.s)))];
		const depth = Math.max(...nodes.map((n) => n.depth)) + 1;
		const errors = nodes.filter((n) => n.s.tags && 'error' in n.s.tags).length;

		const head = el('div', { class: 'trace-header' },
			el('h2', {}, (roots[0] ? svcOf(roots[0].s) + ': ' + (roots[0].s.name || '') : 'Trace')),
			el('div', { class: 'trace-facts' },
				el('span', {}, 'Trace ', el('span', { class: 'mono', id: 'trace-id' }, spans[0].traceId)),
				el('span', {}, 'Duration ', el('b', {}, U.dur(total))),
				el('span', {}, 'Spans ', el('b', { id: 'span-count' }, nodes.length)),
				el('span', {}, 'Depth ', el('b', {}, depth)),
				errors ? el('span', { class: 'err-count' }, `${errors} errors`) : null,
				el('span', {}, 'Started ', U.time(t0 / 1000)),
				el('a', { href: '/api/v2/trace/' + spans[0].traceId, target: '_blank' }, 'JSON')),
			el('div', { class: 'legend' }, svcs.map((s) => el('a', { href: '/traces?serviceName=' + encodeURIComponent(s), class: 'svc-link' }, U.chip(s)))),
			el('label', { class: 'toggle' }, el('input', { type: 'checkbox', id: 'crit-toggle', checked: true,
				onchange: (ev) => wf.classList.toggle('show-crit', ev.target.checked) }), ' highlight the critical path'));

		const axis = el('div', { class: 'wf-axis' }, el('div', { class: 'wf-label' }, 'Service · span'));
		const ticks = el('div', { class: 'wf-ticks' });
		for (let i = 0; i <= 4; i++)
			ticks.append(el('span', { style: `left:${i * 25}%` }, U.dur(total * i / 4)));
		axis.append(ticks);

		const wf = el('div', { class: 'waterfall show-crit', id: 'waterfall' }, axis);
		for (const n of order) {
			const s = n.s, svc = svcOf(s);
			const left = s.timestamp ? 100 * (n.start - t0) / total : 0;
			const width = Math.max(0.3, 100 * (s.duration || 0) / total);
			const bar = el('div', { class: 'wf-bar', style: `left:${left}%;width:${width}%;background:${U.colour(svc)}` });
			// the duration after the bar, or inside its end when no room is left
			const inside = left + width > 88;
			const track = el('div', { class: 'wf-track' }, bar,
				el('span', { class: 'wf-dur' + (inside ? ' inside' : ''),
					style: inside ? `left:calc(${left + width}% - 6px)` : `left:calc(${left + width}% + 4px)` }, U.dur(s.duration)));
			for (const a of s.annotations || []) {
				const x = 100 * (a.timestamp - t0) / total;
				track.append(el('i', { class: 'wf-tick', style: `left:${x}%`, title: `${a.value} @ +${U.dur(a.timestamp - t0)}` }));
			}
			const err = s.tags && 'error' in s.tags;
			const row = el('div', {
				class: 'wf-row' + (n.crit ? ' crit' : '') + (err ? ' error' : ''),
				'data-span': s.id, tabindex: 0,
			},
			el('div', { class: 'wf-label', style: `padding-left:${8 + n.depth * 14}px`, title: `${svc}: ${s.name || ''}` },
				n.kids.length ? el('span', { class: 'caret' }, '▾') : el('span', { class: 'caret' }, ''),
				el('span', { class: 'svc', style: `color:${U.colour(svc)}` }, svc), ' ',
				el('span', { class: 'name' }, s.name || '(unnamed)'),
				s.kind ? el('span', { class: 'kind' }, s.kind.toLowerCase()) : null),
			track);
			const toggle = () => {
				const open = row.nextElementSibling && row.nextElementSibling.classList.contains('span-details');
				for (const d of wf.querySelectorAll('.span-details')) d.remove();
				for (const r of wf.querySelectorAll('.wf-row.selected')) r.classList.remove('selected');
				if (!open) {
					row.classList.add('selected');
					row.after(details(n, t0));
				}
			};
			row.addEventListener('click', toggle);
			row.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') toggle(); });
			wf.append(row);
		}
		main.replaceChildren(el('p', {}, el('a', { href: '/traces', id: 'back' }, '← Traces')), head, wf);
		main.append(await profile(spans[0].traceId));
	}

	return { render, tree, critical };
})();
