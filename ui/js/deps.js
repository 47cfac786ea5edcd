// SPDX-License-Identifier: MIT
// fay UI: the service dependency graph (/api/v2/dependencies) drawn as
// SVG: services in layers from the callers on the left, an arrow per
// parent -> child link, thicker with more calls, redder with more errors.
'use strict';

const Deps = (() => {
	const { el, svg } = U;

	// Layer of each service: longest path from a caller-less service
	// (cycles are cut where they close).
	function layers(names, links) {
		const out = new Map(names.map((n) => [n, []]));
		const indeg = new Map(names.map((n) => [n, 0]));
		for (const l of links) {
			if (l.parent === l.child) continue;
			out.get(l.parent).push(l.child);
			indeg.set(l.child, indeg.get(l.child) + 1);
		}
		const layer = new Map();
		const visit = (n, d, stack) => {
			if (stack.has(n)) return;
			if ((layer.get(n) ?? -1) >= d) return;
			layer.set(n, d);
			stack.add(n);
			for (const c of out.get(n)) visit(c, d + 1, stack);
			stack.delete(n);
		};
		const roots = names.filter((n) => !indeg.get(n));
		for (const r of (roots.length ? roots : [names[0]])) visit(r, 0, new Set());
		for (const n of names) if (!layer.has(n)) visit(n, 0, new Set());
		return layer;
	}

	function draw(links) {
		const names = [...new Set(links.flatMap((l) => [l.parent, l.child]))].sort();
		const layer = layers(names, links);
		const cols = new Map();
		for (const n of names) {
			const d = layer.get(n);
			if (!cols.has(d)) cols.set(d, []);
			cols.get(d).push(n);
		}
		const NW = 150, NH = 34, GX = 120, GY = 28;
		const ncols = Math.max(...cols.keys()) + 1;
		const maxRows = Math.max(...[...cols.values()].map((c) => c.length));
		const W = ncols * NW + (ncols - 1) * GX + 40, H = maxRows * (NH + GY) + 40;
		const pos = new Map();
		for (const [d, list] of cols) {
			const top = (H - list.length * (NH + GY) + GY) / 2;
			list.forEach((n, i) => pos.set(n, { x: 20 + d * (NW + GX), y: top + i * (NH + GY) }));
		}
		const maxCalls = Math.max(...links.map((l) => l.callCount));
		const root = svg('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: 'deps-graph', id: 'deps-graph' },
			svg('defs', {},
				svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 10, markerHeight: 10, markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse' },
					svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#667' }))));
		for (const l of links) {
			const a = pos.get(l.parent), b = pos.get(l.child);
			const er = l.callCount ? (l.errorCount || 0) / l.callCount : 0;
			const w = 1.5 + 4 * Math.log1p(l.callCount) / Math.log1p(maxCalls);
			// grey without errors; orange to red as the error rate grows (25%: red)
			const colour = er > 0 ? `hsl(${Math.round(38 * (1 - Math.min(1, er * 4)))} 80% 48%)` : '#8a94a6';
			let d, lx, ly;
			if (l.parent === l.child) {
				d = `M${a.x + NW - 20},${a.y} C${a.x + NW + 30},${a.y - 40} ${a.x + NW + 30},${a.y + NH + 40} ${a.x + NW - 20},${a.y + NH}`;
				lx = a.x + NW + 26; ly = a.y + NH / 2;
			} else if (b.x > a.x) {
				const x1 = a.x + NW, y1 = a.y + NH / 2, x2 = b.x, y2 = b.y + NH / 2;
				d = `M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2},${y2}`;
				lx = (x1 + x2) / 2; ly = (y1 + y2) / 2 - 6;
			} else {
				const x1 = a.x + NW / 2, y1 = a.y + NH, x2 = b.x + NW / 2, y2 = b.y + NH;
				d = `M${x1},${y1} C${x1},${y1 + 60} ${x2},${y2 + 60} ${x2},${y2}`;
				lx = (x1 + x2) / 2; ly = Math.max(y1, y2) + 40;
			}
			const g = svg('g', { class: 'dep-link', 'data-parent': l.parent, 'data-child': l.child },
				svg('title', { text: `${l.parent} → ${l.child}: ${l.callCount} calls, ${l.errorCount || 0} errors` }),
				svg('path', { d, fill: 'none', stroke: colour, 'stroke-width': w, 'marker-end': 'url(#arrow)' }),
				svg('text', { x: lx, y: ly, 'text-anchor': 'middle', class: 'dep-label' },
					`${l.callCount}${l.errorCount ? ` · ${l.errorCount} err` : ''}`));
			root.append(g);
		}
		for (const n of names) {
			const p = pos.get(n);
			const g = svg('g', { class: 'dep-node', 'data-service': n, transform: `translate(${p.x},${p.y})` },
				svg('rect', { width: NW, height: NH, rx: 6, fill: '#fff', stroke: U.colour(n), 'stroke-width': 2 }),
				svg('rect', { width: 8, height: NH, rx: 3, fill: U.colour(n) }),
				svg('text', { x: NW / 2 + 4, y: NH / 2 + 5, 'text-anchor': 'middle' }, n.length > 18 ? n.slice(0, 17) + '…' : n),
				svg('title', { text: n }));
			g.addEventListener('click', () => {
				const on = !g.classList.contains('focus');
				for (const x of root.querySelectorAll('.focus, .dim')) x.classList.remove('focus', 'dim');
				if (!on) return;
				g.classList.add('focus');
				for (const x of root.querySelectorAll('.dep-link'))
					x.classList.add(x.dataset.parent === n || x.dataset.child === n ? 'focus' : 'dim');
			});
			root.append(g);
		}
		return root;
	}

	async function render(main) {
		const lb = el('select', { id: 'deps-lookback' },
			[['15 minutes', 900e3], ['1 hour', 3600e3], ['6 hours', 21600e3], ['1 day', 86400e3], ['7 days', 604800e3]]
				.map(([t, ms]) => el('option', { value: ms, selected: ms === 86400e3 }, t)));
		const out = el('div', { id: 'deps' });
		main.append(el('h2', {}, 'Dependencies'),
			el('div', { class: 'toolbar' }, el('label', {}, 'Calls in the last ', lb),
				el('span', { class: 'muted' }, 'Derived from parent/child spans; click a service to focus its links.')),
			out);
		async function load() {
			out.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
			try {
				const links = await U.api(`/api/v2/dependencies?endTs=${Date.now()}&lookback=${lb.value}`);
				if (!links.length) {
					out.replaceChildren(el('p', { class: 'muted' }, 'No calls between services in this range.'));
					return;
				}
				const tbl = el('table', { class: 'grid', id: 'deps-table' },
					el('tr', {}, el('th', {}, 'Caller'), el('th', {}, 'Callee'), el('th', {}, 'Calls'), el('th', {}, 'Errors'), el('th', {}, 'Error rate')));
				for (const l of [...links].sort((a, b) => b.callCount - a.callCount))
					tbl.append(el('tr', {}, el('td', {}, U.chip(l.parent)), el('td', {}, U.chip(l.child)),
						el('td', { class: 'num' }, l.callCount), el('td', { class: 'num' }, l.errorCount || 0),
						el('td', { class: 'num' + ((l.errorCount || 0) ? ' bad' : '') }, (100 * (l.errorCount || 0) / l.callCount).toFixed(1) + '%')));
				out.replaceChildren(el('div', { class: 'graph-box' }, draw(links)), tbl);
			} catch (e) {
				out.replaceChildren(U.errorBox(e));
			}
		}
		lb.addEventListener('change', load);
		await load();
	}

	return { render, layers };
})();
