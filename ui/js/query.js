// SPDX-License-Identifier: MIT
// fay UI: live FayQL.  The editor marks an error at its line:col (gutter
// marker, caret under the line, cursor moved there); a running query's
// results stream in (POST /api/query answers NDJSON, read chunk by chunk)
// and show as a table, a histogram, a time series or, grouped by a stack,
// a flame graph (flame.js).  "On the cluster"
// runs the query on every agent of the collector (a cluster query: each
// window says how many hosts answered, and an amended window replaces the
// one it corrects).
'use strict';

const Query = (() => {
	const { el, svg } = U;
	const examples = [
		['syscalls by process, 5s', 'from s in syscall("*")\ngroup s by s.comm into g\nselect { comm: g.key, calls: g.count() }\nfor 5s'],
		['read sizes (the paper)', 'from io in function("libc:read")\nwhere io.time < now + 5m\nlet size = io.arg(2)\ngroup io by size / 1024 into g\nselect { sizeInKilobytes: g.key, countOfReadIOs: g.count() }'],
		['vfs_read p99 per second', 'from f in kernel.function("vfs_read")\nselect { p99: quantile(f.duration, 0.99), bytes: hist(f.ret) }\nwindow 1s'],
		['slow handler calls', 'from c in process(4242).function("handle_request")\nwhere c.duration > 1ms\nselect { pid: c.pid, us: c.duration / 1000 }'],
		['CPU flame graph, 10s', 'from s in profile(99)\ngroup s by s.ustack into g\nselect { stack: g.key, samples: g.count() }\nfor 10s'],
		['an error, to see the marker', 'from s in syscall("read")\nwhere s.bogus > 3\nselect count()'],
	];

	async function render(main) {
		const saved = sessionStorage.getItem('fay.query') || examples[0][1];
		const ta = el('textarea', { id: 'q-text', spellcheck: 'false', rows: 8, wrap: 'off' });
		ta.value = saved;
		const gutter = el('div', { class: 'gutter', id: 'q-gutter' });
		const diag = el('div', { id: 'q-diag' });
		const status = el('span', { id: 'q-status', class: 'muted' });
		const view = el('div', { class: 'seg', id: 'q-view' });
		const out = el('div', { id: 'q-out' });
		const ex = el('select', { id: 'q-examples' }, el('option', { value: '' }, 'Examples…'),
			examples.map(([t], i) => el('option', { value: i }, t)));
		const run = el('button', { type: 'button', class: 'primary', id: 'q-run' }, 'Run ▶');
		const stop = el('button', { type: 'button', id: 'q-stop', disabled: true }, 'Stop');
		const onCluster = el('input', { type: 'checkbox', id: 'q-cluster' });
		onCluster.checked = sessionStorage.getItem('fay.query.cluster') === '1';
		onCluster.addEventListener('change', () => sessionStorage.setItem('fay.query.cluster', onCluster.checked ? '1' : '0'));
		const hosts = el('div', { id: 'q-hosts', class: 'muted' });
		// a cluster answer's completeness (a window's, a result's or a stream's end)
		const showHosts = (m) => {
			const good = Queries.complete(m);
			hosts.replaceChildren(el('span', { class: good ? 'ok-text' : 'bad' },
				`${m.t ? U.time(m.t).slice(11) + ': ' : ''}${Queries.completeness(m)}${m.provisional ? ' · provisional' : ''}${m.amended ? ' · amended' : ''}`));
		};
		let mode = 'table', cols = [], rows = [], windows = [], ctrl = null, errLine = 0, cats = null;
		let windowed = false, attached = '', failed = false, engine = 'host';
		let flame = {};	/* the flame graph's search and zoom (flame.js) */
		const setMode = (m) => { mode = m; for (const b of view.children) b.classList.toggle('on', b.dataset.view === m); };
		for (const m of ['table', 'histogram', 'time series', 'flame graph']) {
			view.append(el('button', { type: 'button', 'data-view': m, class: m === mode ? 'on' : '',
				onclick: () => { setMode(m); draw(); } }, m));
		}

		function lines() {
			const n = ta.value.split('\n').length;
			gutter.replaceChildren(...Array.from({ length: n }, (_, i) =>
				el('div', { class: i + 1 === errLine ? 'err' : '', 'data-line': i + 1 }, i + 1 === errLine ? '⚠ ' + (i + 1) : String(i + 1))));
			gutter.scrollTop = ta.scrollTop;
		}
		ta.addEventListener('input', () => { errLine = 0; ta.classList.remove('has-error'); diag.replaceChildren(); lines(); sessionStorage.setItem('fay.query', ta.value); });
		ta.addEventListener('scroll', () => { gutter.scrollTop = ta.scrollTop; });
		ta.addEventListener('keydown', (ev) => {
			if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); start(); }
			if (ev.key === 'Tab') { ev.preventDefault(); ta.setRangeText('    ', ta.selectionStart, ta.selectionEnd, 'end'); }
		});
		ex.addEventListener('change', () => { if (ex.value !== '') { ta.value = examples[ex.value][1]; ta.dispatchEvent(new Event('input')); } });

		function markError(e) {
			errLine = e.line || 0;
			const text = ta.value.split('\n')[errLine - 1];
			diag.replaceChildren(el('div', { class: 'q-error', role: 'alert', id: 'q-error' },
				el('b', {}, errLine ? `${errLine}:${e.col}: ` : ''), e.error,
				errLine && text !== undefined ? el('pre', { class: 'caret' }, text + '\n' + ' '.repeat(Math.max(0, e.col - 1)) + '^') : null));
			if (errLine) {
				ta.classList.add('has-error');
				const off = ta.value.split('\n').slice(0, errLine - 1).reduce((a, l) => a + l.length + 1, 0) + Math.max(0, e.col - 1);
				ta.focus();
				ta.setSelectionRange(off, off + 1);
			}
			lines();
		}

		function valueText(v) {
			if (v === null || v === undefined) return '';
			if (typeof v === 'object') return JSON.stringify(v);
			return String(v);
		}

		// The categories of the last window: members and what sets them apart.
		function catTable(c) {
			const t = el('table', { class: 'grid', id: 'q-cats' },
				el('thead', {}, el('tr', {}, ['category', 'members', 'distinguishing'].map((h) => el('th', {}, h)))));
			const tb = el('tbody');
			for (const k of c.categories)
				tb.append(el('tr', {}, el('td', {}, el('span', { class: 'chip', style: `--c:${U.colour('category ' + k.category)}` }, String(k.category))),
					el('td', {}, k.members.join(' ')),
					el('td', {}, k.top.map((f) => c.pivot ? `${f} ${Math.round(k.centroid[f] * 100)}%` : `${f} ${k.centroid[f] >= 0 ? '+' : ''}${k.centroid[f].toFixed(1)}sd`).join(', '))));
			t.append(tb);
			return t;
		}

		function draw() {
			out.replaceChildren();
			const data = windows.length ? windows[windows.length - 1].rows : rows;
			if (mode === 'table') {
				// categorize: the category of each row's entity, as a column
				const catOf = new Map(), moved = new Set();
				if (cats) {
					for (const c of cats.categories) for (const e of c.members) catOf.set(e, c.category);
					for (const c of cats.changed) moved.add(c.entity);
				}
				const t = el('table', { class: 'grid', id: 'q-table' },
					el('thead', {}, el('tr', {}, (windows.length ? ['window'] : []).concat(cols.map((c) => c.name), cats ? ['category'] : []).map((h) => el('th', {}, h)))));
				const tb = el('tbody');
				const shown = data.slice(-500);
				for (const r of shown) {
					const tr = el('tr', { class: 'q-row' }, (windows.length ? [U.time(windows[windows.length - 1].t).slice(11)] : []).concat(r.map(valueText)).map((v) => el('td', {}, v)));
					if (cats) {
						const e = valueText(r[cats.entity_column]), n = catOf.get(e);
						tr.append(el('td', { class: 'q-cat' }, n ? el('span', { class: 'chip', style: `--c:${U.colour('category ' + n)}` },
							`${n}${moved.has(e) ? ' (changed)' : ''}`) : ''));
					}
					tb.append(tr);
				}
				t.append(tb);
				out.append(t);
				if (cats) out.append(catTable(cats));
			} else if (mode === 'flame graph') {
				out.append(Flame.fits(cols) ? Flame.render(windowed ? rows : data, cols, flame)
					: el('p', { class: 'muted' }, 'A flame graph needs a stack key and a count: group s by s.ustack into g select { stack: g.key, n: g.count() }'));
			} else if (mode === 'histogram') {
				out.append(histogram(data));
			} else {
				out.append(series());
			}
		}

		// Bars of the last numeric column by the first column, or the
		// buckets of a distribution column ([{lo, hi, count}], hist/lhist).
		function histogram(data) {
			const dist = cols.findIndex((c) => c.type === 'distribution');
			let bars = [];
			if (dist >= 0 && data.length) {
				const d = data[data.length - 1][dist];
				bars = (Array.isArray(d) ? d : []).map((b) => [b.lo === null ? `< ${b.hi}` : b.hi === null ? `≥ ${b.lo}` : `${b.lo}…${b.hi}`, b.count]);
			} else {
				const num = cols.map((c, i) => i).filter((i) => cols[i].type === 'int').pop();
				if (num === undefined) return el('p', { class: 'muted' }, 'No numeric column to plot.');
				bars = data.map((r) => [cols.length > 1 ? valueText(r[num === 0 ? 1 : 0]) : '', Number(r[num])]);
			}
			if (!bars.length) return el('p', { class: 'muted' }, 'No rows yet.');
			bars = bars.slice(0, 60);
			const max = Math.max(1, ...bars.map((b) => b[1]));
			const W = 760, bh = 18, H = bars.length * (bh + 4) + 10;
			const root = svg('svg', { width: W, height: H, class: 'hist', id: 'q-hist' });
			bars.forEach(([label, v], i) => {
				const y = 5 + i * (bh + 4), w = (W - 220) * v / max;
				root.append(svg('text', { x: 150, y: y + 13, 'text-anchor': 'end' }, label.length > 22 ? label.slice(0, 21) + '…' : label),
					svg('rect', { x: 160, y, width: Math.max(1, w), height: bh, fill: '#4e79a7', rx: 2 }),
					svg('text', { x: 166 + w, y: y + 13 }, String(v)));
			});
			return root;
		}

		// Each numeric column over the windows (or over the rows, in order).
		function series() {
			const num = cols.map((c, i) => i).filter((i) => cols[i].type === 'int');
			if (!num.length) return el('p', { class: 'muted' }, 'No numeric column to plot.');
			let xs, ys;
			if (windows.length) {
				xs = windows.map((w) => w.t / 1000);
				ys = num.map((i) => windows.map((w) => w.rows.reduce((a, r) => a + (Number(r[i]) || 0), 0)));
			} else {
				xs = rows.map((_, k) => k);
				ys = num.map((i) => rows.map((r) => Number(r[i]) || 0));
			}
			if (xs.length < 2) return el('p', { class: 'muted' }, 'A time series needs two points or more (use window 1s).');
			const host = el('div', { id: 'q-series' });
			if (window.uPlot) {
				requestAnimationFrame(() => new uPlot({ width: 760, height: 240, scales: { x: { time: !!windows.length } },
					series: [{}].concat(num.map((i) => ({ label: cols[i].name, stroke: U.colour(cols[i].name), width: 1.5 }))) },
				[xs, ...ys], host));
			} else {
				host.append(el('p', { class: 'muted' }, 'uPlot is not in this build.'));
			}
			return host;
		}

		async function start() {
			if (ctrl) ctrl.abort();
			ctrl = new AbortController();
			cols = []; rows = []; windows = []; errLine = 0; cats = null; windowed = false; attached = ''; failed = false; flame = {};
			diag.replaceChildren(); hosts.replaceChildren(); ta.classList.remove('has-error'); lines(); draw();
			status.textContent = 'compiling…';
			run.disabled = true; stop.disabled = false;
			const t0 = performance.now();
			try {
				const send = () => fetch('/api/query', { method: 'POST', signal: ctrl.signal,
					body: onCluster.checked ? JSON.stringify({ query: ta.value, cluster: true }) : ta.value,
					headers: Object.assign({ 'Content-Type': onCluster.checked ? 'application/json' : 'text/plain' }, U.authHeaders()) });
				let r = await send();
				while (r.status === 401) {	/* sign in, then run it */
					status.textContent = 'needs a token';
					await U.login((await r.text()).trim());
					r = await send();
				}
				if (!r.ok) {
					const text = await r.text();
					let body;
					try { body = JSON.parse(text); } catch (e) { body = { error: text.trim() }; }
					if (r.status === 400) {
						markError(body);
						status.textContent = 'error in the query';
					} else {
						diag.replaceChildren(el('div', { class: r.status === 501 ? 'q-info' : 'q-error', id: r.status === 501 ? 'q-unavailable' : 'q-error' }, body.error || text));
						status.textContent = r.status === 501 ? 'compiled; not run' : `failed (${r.status})`;
						if (body.columns) { cols = body.columns; draw(); }
					}
					return;
				}
				status.textContent = 'running…';
				const reader = r.body.getReader();
				const dec = new TextDecoder();
				let buf = '', pending = false;
				const redraw = () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } };
				for (;;) {
					const { value, done } = await reader.read();
					if (done) break;
					buf += dec.decode(value, { stream: true });
					let nl;
					while ((nl = buf.indexOf('\n')) >= 0) {
						const line = buf.slice(0, nl);
						buf = buf.slice(nl + 1);
						if (!line.trim()) continue;
						const m = JSON.parse(line);
						if (m.type === 'columns') {
							cols = m.columns; windowed = m.window_ms > 0; engine = m.engine;
							if (Flame.fits(cols)) setMode('flame graph');
						}
						else if (m.type === 'row') rows.push(m.values);
						else if (m.type === 'window') {
							// a 'window' result, or a snapshot of a query without one
							const old = m.amended ? windows.findIndex((w) => w.t === m.t) : -1;
							if (old >= 0) { windows[old] = { t: m.t, rows: m.rows }; rows = windows.flatMap((w) => w.rows); }
							else if (windowed) { windows.push({ t: m.t, rows: m.rows }); rows.push(...m.rows); }
							else rows = m.rows;
							cats = m.categories ? m : cats;
							if (m.hosts) showHosts(m);
						} else if (m.type === 'stream_end' && m.hosts) {
							// a cluster stream's end: which hosts it heard out
							showHosts(m);
						} else if (m.type === 'progress' && m.attached !== undefined) {
							const what = engine === 'cluster' ? 'host' : 'probe';
							attached = `${m.attached} ${what}${m.attached === 1 ? '' : 's'} attached`;
						} else if (m.type === 'dropped') {
							diag.replaceChildren(el('div', { class: 'q-info', id: 'q-dropped' }, 'Events dropped: ' +
								Object.entries(m.counters).map(([k, v]) => `${k}: ${v}`).join('; ')));
						} else if (m.type === 'error') {
							if (m.line) markError(m);
							else diag.replaceChildren(el('div', { class: 'q-error', id: 'q-error' }, m.error));
							failed = true;
						}
						if (m.type === 'end') status.textContent = `done: ${rows.length} rows${windows.length ? ` in ${windows.length} windows` : ''}, ${m.ms} ms`;
						else status.textContent = failed ? 'failed' : `running… ${attached ? attached + ', ' : ''}${rows.length} rows`;
						redraw();
					}
				}
				if (!/^(done|failed)/.test(status.textContent)) status.textContent = `ended: ${rows.length} rows in ${Math.round(performance.now() - t0)} ms`;
			} catch (e) {
				if (e.name === 'AbortError') status.textContent = `stopped: ${rows.length} rows`;
				else diag.replaceChildren(U.errorBox(e));
			} finally {
				run.disabled = false; stop.disabled = true; ctrl = null;
				draw();
			}
		}
		run.addEventListener('click', start);
		stop.addEventListener('click', () => ctrl && ctrl.abort());

		main.append(el('h2', {}, 'Live query'),
			el('p', { class: 'muted' }, 'FayQL runs on the collector\'s host (POST /api/query: probes need root or CAP_BPF+CAP_PERFMON), or on every agent of this collector with "on the cluster" (or a cluster. source); results stream in; Stop or leaving the page detaches the probes. Ctrl+Enter runs.'),
			el('div', { class: 'editor' }, gutter, ta),
			el('div', { class: 'toolbar' }, run, stop, el('label', { class: 'toggle', for: 'q-cluster' }, onCluster, ' on the cluster'), ex, view, status),
			hosts, diag, out);
		lines();
		return () => ctrl && ctrl.abort();
	}

	return { render };
})();
