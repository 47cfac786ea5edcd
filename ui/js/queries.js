// SPDX-License-Identifier: MIT
// fay UI: standing cluster queries, Fay's distributed performance
// counters.  /queries lists them (GET /api/queries) with their latest
// window and its completeness, registers new ones (POST /api/queries) and
// drops them (DELETE /api/queries/NAME); /queries/NAME charts a query's
// history (GET /api/queries/NAME/results): one series per group and
// integer column, over the windows; a query grouped by a stack also draws
// the samples of its kept windows as one flame graph (flame.js).
'use strict';

const Queries = (() => {
	const { el } = U;
	const HISTORY = 300;	// windows charted

	// "3 of 3 hosts" plus what is missing, late or failed.
	function completeness(w) {
		const h = w && w.hosts;
		if (!h) return '–';
		const parts = [`${h.answered} of ${h.asked} host${h.asked === 1 ? '' : 's'}`];
		if (h.missing && h.missing.length) parts.push('missing ' + h.missing.join(', '));
		if (h.failed && h.failed.length) parts.push('failed ' + h.failed.join(', '));
		if (h.late) parts.push(`${h.late} late`);
		return parts.join(' · ');
	}

	function complete(w) {
		const h = w && w.hosts;
		return !!h && h.answered === h.asked && !(h.missing && h.missing.length);
	}

	// The label of a row: its key and string columns, "comm=bash host=a".
	function labelOf(cols, row) {
		const l = cols.map((c, i) => (c.key || c.type === 'string' ? `${c.name}=${row[i]}` : null)).filter((x) => x !== null);
		return l.length ? l.join(' ') : 'all';
	}

	function valueText(v) {
		if (v === null || v === undefined) return '';
		return typeof v === 'object' ? JSON.stringify(v) : String(v);
	}

	function rowsTable(cols, rows, id) {
		return el('table', { class: 'grid', id },
			el('thead', {}, el('tr', {}, cols.map((c) => el('th', {}, c.name)))),
			el('tbody', {}, rows.map((r) => el('tr', { class: 'sq-row' }, r.map((v, i) => el('td',
				cols[i] && cols[i].unit === 'ns' ? { title: `${v} ns` } : {},
				cols[i] && cols[i].unit === 'ns' && typeof v === 'number' ? U.dur(v / 1000) : valueText(v)))))));
	}

	async function list(main) {
		const out = el('div', { id: 'sq-list' });
		const name = el('input', { id: 'sq-name', placeholder: 'name (letters, digits, _)', size: 20 });
		const ta = el('textarea', { id: 'sq-text', rows: 4, spellcheck: 'false', wrap: 'off',
			placeholder: 'from s in cluster.syscall("read")\ngroup s by s.host into g\nselect { host: g.key, calls: g.count() }\nwindow 1s' });
		const msg = el('div', { id: 'sq-msg' });
		const add = el('button', { type: 'button', class: 'primary', id: 'sq-add' }, 'Keep');
		main.append(el('h2', {}, 'Standing queries'),
			el('p', { class: 'muted' }, 'Windowed cluster queries that run until dropped, on every agent of this collector (and again on agents that reconnect). Each window is kept as history and its latest values are on /metrics as fay_query_NAME.'),
			out,
			el('h3', {}, 'Keep a query'),
			el('div', { class: 'sq-form' }, name, ta, el('div', { class: 'toolbar' }, add, el('span', { class: 'muted' }, 'Same as fay query --cluster URL --keep NAME \'QUERY\'; the query needs a window.'))),
			msg);

		async function load() {
			const d = await U.load('/api/queries', out);
			if (!d) return;
			if (!d.length) {
				out.replaceChildren(el('p', { class: 'muted', id: 'sq-none' }, 'No standing query. Keep one below, or with fay query --cluster URL --keep NAME \'QUERY\'.'));
				return;
			}
			out.replaceChildren(el('table', { class: 'grid', id: 'sq-table' },
				el('thead', {}, el('tr', {}, ['Name', 'Query', 'Windows', 'Latest window', 'Hosts', 'Rows', ''].map((h) => el('th', {}, h)))),
				el('tbody', {}, d.map((q) => el('tr', { 'data-name': q.name },
					el('td', {}, el('a', { href: '/queries/' + encodeURIComponent(q.name) }, q.name)),
					el('td', {}, el('pre', { class: 'sq-query' }, q.query)),
					el('td', { class: 'num' }, q.windows),
					el('td', {}, q.last ? U.time(q.last.t).slice(11) : '–'),
					el('td', { class: q.last ? (complete(q.last) ? 'ok-text' : 'bad') : '' }, completeness(q.last)),
					el('td', { class: 'num' }, q.last ? q.last.rows.length : 0),
					el('td', {}, el('button', { type: 'button', class: 'link sq-drop', onclick: () => drop(q.name) }, 'drop')))))));
		}

		async function drop(n) {
			if (!confirm(`Drop the standing query ${n}? Its agents detach its probes; its history file stays.`)) return;
			try {
				await U.api('/api/queries/' + encodeURIComponent(n), { method: 'DELETE' });
				msg.replaceChildren(el('div', { class: 'q-info' }, `Dropped ${n}.`));
			} catch (e) {
				msg.replaceChildren(U.errorBox(e));
			}
			await load();
		}

		add.addEventListener('click', async () => {
			msg.replaceChildren();
			try {
				await U.api('/api/queries', { method: 'POST', headers: { 'Content-Type': 'application/json' },
					body: JSON.stringify({ name: name.value.trim(), query: ta.value }) });
				msg.replaceChildren(el('div', { class: 'q-info', id: 'sq-added' }, `Keeping ${name.value.trim()}.`));
				name.value = '';
				ta.value = '';
			} catch (e) {
				const b = e.body || {};
				msg.replaceChildren(el('div', { class: 'q-error', role: 'alert', id: 'sq-error' },
					b.line ? el('b', {}, `${b.line}:${b.col}: `) : null, e.message));
			}
			await load();
		});
		await load();
		const timer = setInterval(load, 2000);
		return () => clearInterval(timer);
	}

	// One series per (row label, integer column) over the windows.
	function seriesOf(d) {
		const cols = d.columns || [];
		const num = cols.map((c, i) => i).filter((i) => cols[i].type === 'int' && !cols[i].key);
		const ts = d.windows.map((w) => w.t / 1000);
		const byLabel = new Map();
		d.windows.forEach((w, k) => {
			for (const r of w.rows) {
				const label = labelOf(cols, r);
				for (const i of num) {
					const name = num.length > 1 ? `${label} ${cols[i].name}` : label;
					if (!byLabel.has(name)) byLabel.set(name, { unit: cols[i].unit || '', data: new Array(ts.length).fill(null) });
					byLabel.get(name).data[k] = Number(r[i]);
				}
			}
		});
		return { ts, series: [...byLabel.entries()].slice(0, 24).map(([label, v]) => ({ label, unit: v.unit, data: v.data })) };
	}

	// A y axis's tick labels: times for "ns" columns, else counts (12k, 3.4M).
	function tick(unit) {
		return unit === 'ns' ? (v) => U.dur(v / 1000) : (v) => {
			const a = Math.abs(v);
			if (a >= 1e9) return +(v / 1e9).toFixed(a >= 1e10 ? 0 : 1) + 'G';
			if (a >= 1e6) return +(v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + 'M';
			if (a >= 1e4) return +(v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + 'k';
			return String(+v.toFixed(2));
		};
	}

	// uPlot options: one y scale and axis per unit (counts on the left,
	// times on the right when both are charted; one unit: on the left),
	// each axis as wide as its longest label, and x from the first window
	// to the last.
	function plotOpts(ts, series, w, box) {
		const units = [...new Set(series.map((s) => s.unit))].sort();
		const scales = { x: { time: true, range: (u) => [u.data[0][0], Math.max(u.data[0][u.data[0].length - 1], u.data[0][0] + 1)] } };
		const axes = [{}];
		units.forEach((unit, k) => {
			const fmt = tick(unit);
			scales[unit || 'n'] = {};
			axes.push({ scale: unit || 'n', side: k ? 1 : 3, grid: { show: k === 0 },
				label: unit === 'ns' ? 'time' : 'count', labelSize: 18,
				values: (u, vals) => vals.map(fmt),
				size: (u, vals) => vals && vals.length ? 16 + 7 * Math.max(...vals.map((v) => String(v).length)) : 40 });
		});
		// the x range drawn, for whoever checks it (tests/ui/cluster.mjs)
		const hooks = { setScale: [(u, key) => { if (key === 'x') box.dataset.xmax = String(u.scales.x.max); }] };
		return { width: w, height: 260, scales, axes, hooks,
			series: [{}].concat(series.map((s) => ({ label: s.label, scale: s.unit || 'n', stroke: U.colour(s.label), width: 1.5, spanGaps: false,
				value: (u, v) => v === null || v === undefined ? '–' : tick(s.unit)(v) }))) };
	}

	async function detail(main, name) {
		const head = el('div', { id: 'sq-head' });
		const chartBox = el('div', { id: 'sq-chart', class: 'chart-card wide' });
		const latest = el('div', { id: 'sq-latest' });
		const flameBox = el('div', { id: 'sq-flame' });
		main.append(el('p', {}, el('a', { href: '/queries' }, '← Standing queries')),
			el('h2', {}, 'Standing query ', el('span', { class: 'mono' }, name)), head, flameBox, chartBox,
			el('h3', {}, 'Latest window'), latest);
		let plot = null, shape = '';
		const flame = {};	/* its search and zoom across reloads */

		async function load() {
			const d = await U.load(`/api/queries/${encodeURIComponent(name)}/results?limit=${HISTORY}`, head);
			if (!d) return;
			const last = d.windows[d.windows.length - 1];
			head.replaceChildren(el('pre', { class: 'sq-query' }, d.query),
				el('p', { class: 'muted' }, `${d.windows.length} window${d.windows.length === 1 ? '' : 's'} kept here · `,
					el('a', { href: '/metrics' }, 'fay_query_' + name), ' on /metrics'));
			if (!last) {
				chartBox.replaceChildren(el('p', { class: 'muted', id: 'sq-nodata' }, 'No window yet: the first arrives when the first window closes.'));
				latest.replaceChildren();
				return;
			}
			latest.replaceChildren(
				el('p', { class: complete(last) ? 'ok-text' : 'bad', id: 'sq-complete' },
					`${U.time(last.t)} · ${completeness(last)}${last.provisional ? ' · provisional' : ''}${last.amended ? ' · amended' : ''}`),
				rowsTable(d.columns || [], last.rows, 'sq-rows'));
			if (Flame.fits(d.columns || [])) {
				// every kept window's samples; a trace id column (one
				// request's samples: the trace page) is left out
				const t = d.columns.findIndex((c) => c.trace);
				const cols = d.columns.filter((c, i) => i !== t);
				const rows = d.windows.flatMap((x) => (x.rows || []).map((r) => r.filter((v, i) => i !== t)));
				flameBox.replaceChildren(el('h3', {}, `Flame graph of the ${d.windows.length} windows kept`),
					Flame.render(rows, cols, flame));
				chartBox.hidden = true;
				return;
			}
			const { ts, series } = seriesOf(d);
			if (!series.length) {
				chartBox.replaceChildren(el('p', { class: 'muted' }, 'No integer column to chart.'));
				return;
			}
			const w = Math.min(1100, Math.max(480, main.clientWidth - 40));
			const key = series.map((s) => s.label + ' ' + s.unit).join('\n');
			chartBox.dataset.axes = [...new Set(series.map((s) => s.unit || 'count'))].sort().join(',');
			chartBox.dataset.xlast = String(ts[ts.length - 1]);
			if (window.uPlot) {
				if (plot && key === shape) {
					plot.setData([ts, ...series.map((s) => s.data)]);
					return;
				}
				if (plot) plot.destroy();
				chartBox.replaceChildren(el('div', { class: 'chart-title' }, 'History: one line per group and column'));
				const host = el('div', { class: 'uplot-host' });
				chartBox.append(host);
				plot = new uPlot(plotOpts(ts, series, w, chartBox), [ts, ...series.map((s) => s.data)], host);
				shape = key;
			} else {
				chartBox.replaceChildren(el('div', { class: 'chart-title' }, 'History: one line per group and column'),
					U.svgLines(ts, series.map((s) => ({ data: s.data, stroke: U.colour(s.label), scale: s.unit })), w, 260,
						(max, unit) => tick(unit)(max), 'sq-svg'),
					el('div', { class: 'muted' }, series.map((s) => s.label).join(' · ')));
			}
		}
		await load();
		const timer = setInterval(load, 2000);
		return () => { clearInterval(timer); if (plot) plot.destroy(); };
	}

	function render(main, name) {
		return name ? detail(main, decodeURIComponent(name)) : list(main);
	}

	return { render, completeness, complete };
})();
