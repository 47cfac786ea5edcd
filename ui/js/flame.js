// SPDX-License-Identifier: MIT
// fay UI: a flame graph of a query result grouped by a stack (s.ustack,
// s.kstack): each row's folded frames (root first, ';' between) weighed
// by its first numeric aggregate, merged into one tree, drawn root at the
// bottom, a frame as wide as its share.  Click a frame to zoom to it
// (its ancestors stay, full width), click the root or "Reset zoom" to
// zoom out; the search box marks every frame whose name matches (a
// regular expression, else the text) and says what share of the samples
// they hold.
'use strict';

const Flame = (() => {
	const { el, svg } = U;
	const W = 960, H = 17;

	// { name, value, kids: Map } from the rows: stack column s, value
	// column v; other key columns (host, comm) as the outermost frames.
	function tree(rows, cols) {
		const s = cols.findIndex((c) => c.stack);
		const v = cols.findIndex((c, i) => c.type === 'int' && !c.key && i !== s);
		const outer = cols.map((c, i) => i).filter((i) => cols[i].key && !cols[i].stack && i < s);
		const root = { name: 'all', value: 0, kids: new Map() };
		for (const r of rows) {
			const n = Number(r[v]) || 0;
			if (n <= 0) continue;
			const frames = outer.map((i) => String(r[i])).concat(String(r[s] || '').split(';').filter((f) => f));
			let node = root;
			root.value += n;
			for (const f of frames) {
				let k = node.kids.get(f);
				if (!k) node.kids.set(f, (k = { name: f, value: 0, kids: new Map(), parent: node }));
				k.value += n;
				node = k;
			}
		}
		return root;
	}

	function depth(n) {
		let d = 0;
		for (const k of n.kids.values()) d = Math.max(d, depth(k));
		return d + 1;
	}

	// A warm colour per name, stable across redraws.
	function colour(name) {
		let h = 0;
		for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
		return `hsl(${10 + (h % 40)}, ${70 + (h >> 8) % 20}%, ${55 + (h >> 16) % 10}%)`;
	}

	function matcher(q) {
		if (!q) return null;
		try { return new RegExp(q); } catch (e) { return { test: (s) => s.includes(q) }; }
	}

	// The element: search box, zoom reset, the SVG, what the pointer is on.
	// state ({ q, path }) keeps the search and the zoom (frame names from
	// the root) across redraws of a result that is still growing.
	function render(rows, cols, state = {}) {
		const root = tree(rows, cols);
		const search = el('input', { type: 'search', id: 'fg-search', placeholder: 'Search a frame (regex)', size: 28 });
		search.value = state.q || '';
		const reset = el('button', { type: 'button', id: 'fg-reset' }, 'Reset zoom');
		const info = el('span', { id: 'fg-info', class: 'muted' });
		const found = el('span', { id: 'fg-found', class: 'muted' });
		const host = el('div', { id: 'fg' });
		let zoom = root;
		for (const name of state.path || []) {
			const k = zoom.kids.get(name);
			if (!k) break;
			zoom = k;
		}

		function draw() {
			state.q = search.value;
			state.path = [];
			for (let n = zoom; n.parent; n = n.parent) state.path.unshift(n.name);
			const levels = depth(root);
			const height = levels * H + 4;
			const g = svg('svg', { width: W, height, class: 'flame', id: 'fg-svg' });
			const m = matcher(search.value.trim());
			let hit = 0;
			// zoom's ancestors span the whole width; below it, shares of it
			const path = [];
			for (let n = zoom; n; n = n.parent) path.unshift(n);
			const box = (n, x, w, d, full) => {
				if (w < 0.5) return;
				const y = height - (d + 1) * H;
				const on = m && m.test(n.name);
				const label = `${n.name} (${n.value}, ${(100 * n.value / root.value).toFixed(1)}%)`;
				const r = svg('g', { class: 'fg-frame' + (on ? ' fg-hit' : ''), 'data-name': n.name, 'data-value': n.value,
					onclick: () => { zoom = n === zoom && n.parent ? n.parent : n; draw(); },
					onmouseover: () => { info.textContent = label; } },
				svg('title', {}, label),
				svg('rect', { x: x.toFixed(1), y, width: Math.max(0.5, w - 0.5).toFixed(1), height: H - 1, rx: 2,
					fill: on ? '#c05cf0' : full ? '#d9d9d9' : colour(n.name) }),
				w > 30 ? svg('text', { x: (x + 3).toFixed(1), y: y + 12 },
					n.name.length * 7 > w - 6 ? n.name.slice(0, Math.max(1, Math.floor((w - 6) / 7) - 1)) + '…' : n.name) : null);
				g.append(r);
			};
			path.forEach((n, d) => box(n, 0, W, d, n !== zoom));
			const walk = (n, x, d) => {
				let cx = x;
				for (const k of [...n.kids.values()].sort((a, b) => a.name < b.name ? -1 : 1)) {
					const w = W * k.value / zoom.value;
					box(k, cx, w, d, false);
					walk(k, cx, d + 1);
					cx += w;
				}
			};
			walk(zoom, 0, path.length);
			// the share of the samples under a matching frame (a match under
			// a match counted once)
			const count = (n) => (m && m.test(n.name) ? n.value : [...n.kids.values()].reduce((a, k) => a + count(k), 0));
			if (m) {
				hit = count(root);
				found.textContent = `matched: ${hit} of ${root.value} (${(100 * hit / Math.max(1, root.value)).toFixed(1)}%)`;
			} else {
				found.textContent = '';
			}
			reset.disabled = zoom === root;
			host.replaceChildren(g);
		}
		search.addEventListener('input', draw);
		reset.addEventListener('click', () => { zoom = root; draw(); });
		if (!root.value) return el('p', { class: 'muted', id: 'fg-empty' }, 'No samples yet.');
		draw();
		return el('div', { class: 'flame-box' }, el('div', { class: 'toolbar' }, search, reset, found), host, info);
	}

	// Has a result of these columns a stack to draw?
	function fits(cols) {
		const s = cols.findIndex((c) => c.stack);
		return s >= 0 && cols.some((c, i) => c.type === 'int' && !c.key && i !== s);
	}

	return { render, fits };
})();
