// SPDX-License-Identifier: MIT
// fay UI: BlkKin's monitoring view.  Per service and span name, the
// p50/p99/avg latency, rate and errors over the last 10 minutes, each
// cell green or red against its threshold, with time-series charts
// (uPlot, embedded at build time; a plain SVG chart when it is absent).
// Thresholds come from the collector (--thresholds FILE) and are edited
// here (PUT /api/ui/thresholds writes the file back).
'use strict';

const Dashboard = (() => {
	const { el } = U;
	const metrics = [['p50_us', 'p50'], ['p99_us', 'p99'], ['avg_us', 'avg']];

	function cell(row, key, text) {
		const st = row.state[key];
		const lim = row.thresholds[key];
		return el('td', { class: 'cell num ' + st, 'data-metric': key, title: lim === null ? 'no threshold' : `threshold ${key === 'error_rate' ? (100 * lim).toFixed(2) + '%' : U.dur(lim)}` },
			el('span', { class: 'v' }, text),
			lim === null ? null : el('span', { class: 'lim' }, '≤ ' + (key === 'error_rate' ? (100 * lim).toFixed(1) + '%' : U.dur(lim))));
	}

	const svgChart = (times, series, w, h) => U.svgLines(times, series, w, h, (max) => U.dur(max * 1000));

	function chart(row, times, w) {
		const ms = (a) => a.map((v) => (v === null ? null : v / 1000));
		const lim = row.thresholds.p99_us;
		const series = [
			{ label: 'p50', stroke: '#4e79a7', data: ms(row.series.p50_us) },
			{ label: 'p99', stroke: '#e15759', data: ms(row.series.p99_us) },
			{ label: 'avg', stroke: '#59a14f', data: ms(row.series.avg_us) },
		];
		if (lim !== null) series.push({ label: 'p99 limit', stroke: '#e15759', dash: [4, 3], data: times.map(() => lim / 1000) });
		const box = el('div', { class: 'chart-card', 'data-key': row.service + '/' + row.span },
			el('div', { class: 'chart-title' }, U.chip(row.service), ' ', row.span,
				el('span', { class: 'muted' }, ` · ${row.count} spans · ${row.rate.toFixed(2)}/s`)));
		const secs = times.map((t) => t / 1000);
		if (window.uPlot) {
			const opts = {
				width: w, height: 150, legend: { show: true },
				scales: { x: { time: true } },
				axes: [{ size: 30, space: 70 }, { size: 64, values: (u, v) => v.map((x) => U.dur(x * 1000)) }],
				series: [{}].concat(series.map((s) => ({ label: s.label, stroke: s.stroke, width: 1.5, dash: s.dash, spanGaps: false,
					value: (u, v) => (v === null ? '–' : U.dur(v * 1000)) }))),
			};
			box.append(el('div', { class: 'uplot-host' }));
			requestAnimationFrame(() => new uPlot(opts, [secs, ...series.map((s) => s.data)], box.lastChild));
		} else {
			box.append(svgChart(secs, series, w, 150));
		}
		return box;
	}

	function rateChart(data, w) {
		const secs = data.times.map((t) => t / 1000);
		const box = el('div', { class: 'chart-card wide' }, el('div', { class: 'chart-title' }, 'Rate (spans/s) and errors per interval'));
		const series = data.rows.slice(0, 10).map((r) => ({ label: `${r.service}/${r.span}`, stroke: U.colour(r.service + r.span), data: r.series.rate }));
		const errs = data.times.map((_, i) => data.rows.reduce((a, r) => a + r.series.errors[i], 0));
		series.push({ label: 'errors', stroke: '#e15759', dash: [2, 2], data: errs });
		if (window.uPlot) {
			box.append(el('div', { class: 'uplot-host' }));
			requestAnimationFrame(() => new uPlot({ width: w, height: 170, scales: { x: { time: true } }, axes: [{ space: 90 }, {}],
				series: [{}].concat(series.map((s) => ({ label: s.label, stroke: s.stroke, dash: s.dash, width: 1.5 }))) },
			[secs, ...series.map((s) => s.data)], box.lastChild));
		} else {
			box.append(svgChart(secs, series, w, 170));
		}
		return box;
	}

	// ---- thresholds editor ----
	function editor(rules, onSaved) {
		const tbody = el('tbody');
		const msg = el('span', { class: 'muted', id: 'th-msg' });
		const inp = (cls, v, ph) => el('input', { class: cls, value: v ?? '', placeholder: ph, size: 8 });
		function addRow(r = {}) {
			const tr = el('tr', { class: 'th-rule' },
				el('td', {}, inp('th-service', r.service || '*', '*')),
				el('td', {}, inp('th-span', r.span || '*', '*')),
				el('td', {}, inp('th-p50', r.p50_us != null ? U.dur(r.p50_us).replace('µs', 'us') : '', '–')),
				el('td', {}, inp('th-p99', r.p99_us != null ? U.dur(r.p99_us).replace('µs', 'us') : '', '–')),
				el('td', {}, inp('th-avg', r.avg_us != null ? U.dur(r.avg_us).replace('µs', 'us') : '', '–')),
				el('td', {}, inp('th-err', r.error_rate ?? '', '0.01')),
				el('td', {}, el('button', { type: 'button', class: 'link', onclick: () => tr.remove() }, 'remove')));
			tbody.append(tr);
			return tr;
		}
		for (const r of rules) addRow(r);
		async function save() {
			const out = [], bad = [];
			tbody.querySelectorAll('tr').forEach((tr, i) => {
				const g = (c) => tr.querySelector('.' + c).value.trim();
				const r = { service: g('th-service') || '*', span: g('th-span') || '*' };
				for (const [c, k] of [['th-p50', 'p50_us'], ['th-p99', 'p99_us'], ['th-avg', 'avg_us']]) {
					if (!g(c)) continue;
					const us = U.parseDur(g(c));
					if (isNaN(us)) bad.push(`rule ${i + 1}: ${k.slice(0, 3)} '${g(c)}' is not a duration (5ms, 800us)`);
					r[k] = us;
				}
				if (g('th-err')) r.error_rate = Number(g('th-err'));
				out.push(r);
			});
			if (bad.length) {
				msg.textContent = bad.join('; ');
				msg.className = 'bad';
				return;
			}
			try {
				const res = await U.api('/api/ui/thresholds', { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ rules: out }) });
				msg.textContent = `saved to ${res.file}`;
				msg.className = 'ok-text';
				onSaved();
			} catch (e) {
				msg.textContent = e.message;
				msg.className = 'bad';
			}
		}
		return {
			addRow,
			node: el('details', { class: 'th-editor', id: 'th-editor', open: true },
				el('summary', {}, 'Thresholds'),
				el('p', { class: 'muted' }, 'A cell turns red when its value is above the most specific rule (service and span > service > span > *). Durations like 5ms or 800us; error rate as a fraction.'),
				el('table', { class: 'grid' }, el('thead', {}, el('tr', {}, ['Service', 'Span', 'p50 ≤', 'p99 ≤', 'avg ≤', 'error rate ≤', ''].map((h) => el('th', {}, h)))), tbody),
				el('div', { class: 'toolbar' },
					el('button', { type: 'button', id: 'th-add', onclick: () => addRow() }, 'Add rule'),
					el('button', { type: 'button', class: 'primary', id: 'th-save', onclick: save }, 'Save thresholds'), msg)),
		};
	}

	async function render(main) {
		const win = el('select', { id: 'dash-window' },
			[['5 minutes', 300, 15], ['10 minutes', 600, 30], ['30 minutes', 1800, 60], ['1 hour', 3600, 120]]
				.map(([t, s, st]) => el('option', { value: `${s}:${st}`, selected: s === 600 }, t)));
		const auto = el('input', { type: 'checkbox', id: 'dash-auto', checked: true });
		const updated = el('span', { class: 'muted', id: 'dash-updated' });
		const table = el('div', { id: 'dash-table' });
		const charts = el('div', { class: 'charts', id: 'dash-charts' });
		const edBox = el('div');
		main.append(el('h2', {}, 'Dashboard'),
			el('div', { class: 'toolbar' }, el('label', {}, 'Window ', win), el('label', {}, auto, ' refresh every 5s'), updated),
			table, edBox, charts);
		let ed = null;

		async function load() {
			const [w, st] = win.value.split(':');
			let d;
			try {
				d = await U.api(`/api/ui/dashboard?window=${w}&step=${st}`);
			} catch (e) {
				table.replaceChildren(U.errorBox(e));
				return;
			}
			if (!ed) {
				ed = editor(d.thresholds.rules || [], load);
				edBox.append(ed.node);
			}
			const t = el('table', { class: 'grid dash' },
				el('thead', {}, el('tr', {}, ['Service', 'Span', 'Count', 'Rate/s', 'Errors', 'p50', 'p99', 'avg', ''].map((h) => el('th', {}, h)))));
			const tb = el('tbody');
			for (const r of d.rows) {
				tb.append(el('tr', { 'data-key': r.service + '/' + r.span },
					el('td', {}, el('a', { href: '/traces?serviceName=' + encodeURIComponent(r.service) + '&spanName=' + encodeURIComponent(r.span) + '&lookback=' + w * 1000 }, U.chip(r.service))),
					el('td', {}, r.span),
					el('td', { class: 'num' }, r.count),
					el('td', { class: 'num' }, r.rate.toFixed(2)),
					cell(r, 'error_rate', `${r.errors} (${(100 * r.error_rate).toFixed(1)}%)`),
					metrics.map(([k]) => cell(r, k, U.dur(r[k]))),
					el('td', {}, el('button', { type: 'button', class: 'link', title: 'add a threshold rule for this row',
						onclick: () => ed.addRow({ service: r.service, span: r.span }).querySelector('.th-p99').focus() }, '+ threshold'))));
			}
			t.append(tb);
			table.replaceChildren(d.rows.length ? t : el('p', { class: 'muted' }, 'No spans in this window.'));
			const cw = Math.max(320, Math.min(560, (main.clientWidth - 40) / 2 - 20));
			charts.replaceChildren(...(d.rows.length ? [rateChart(d, Math.max(640, main.clientWidth - 60))] : []),
				...d.rows.slice(0, 24).map((r) => chart(r, d.times, cw)));
			updated.textContent = 'updated ' + U.time(Date.now()).slice(11, 19);
		}
		const timer = setInterval(() => { if (auto.checked && document.visibilityState === 'visible') load(); }, 5000);
		win.addEventListener('change', load);
		await load();
		return () => clearInterval(timer);
	}

	return { render };
})();
