// SPDX-License-Identifier: MIT
// fay UI: the flight recorder (#22).  /captures lists the capture rules
// (GET /api/captures/rules: each predicate with its counts; a form
// registers one, POST /api/captures/rules; drop: DELETE), captures a
// trace by id or the last N seconds of the hosts' flight buffers (POST
// /api/captures), and lists the captures made (GET /api/captures, kept
// across restarts of the collector), each with its completeness: hosts
// answered of asked, spans stored, spans that came late in its follow
// rounds, and for a rule's capture the time from the matching span's end
// to its trace stored.  Capture.button(id) is the "capture this trace"
// action the trace page offers when a trace is not stored.
'use strict';

const Captures = (() => {
	const { el } = U;

	// What a capture's trace id is, when it captured one trace.
	function traceOf(c) {
		const m = /trace ([0-9a-f]{16,32})$/.exec(c.by || '');
		return m ? m[1] : null;
	}

	// "3 of 3 hosts" plus those that did not answer.
	function hostsText(c) {
		const bad = (c.hosts || []).filter((h) => h.state !== 'answered' && h.state !== 'no flight buffer');
		return `${c.hosts_answered} of ${c.hosts_asked} host${c.hosts_asked === 1 ? '' : 's'}` +
			(bad.length ? ' · ' + bad.map((h) => `${h.host} ${h.state}`).join(', ') : '');
	}

	function complete(c) {
		return c.hosts_answered === c.hosts_asked && !(c.hosts || []).some((h) => h.state === 'missing' ||
			h.state === 'not connected' || h.cut) && !c.error;
	}

	function lateText(c) {
		if (!c.follow_ms) return '–';
		const s = `${c.spans_late} late` + (c.spans_late ? ` (last ${U.dur(c.last_late_ms * 1000)} after)` : '');
		return c.following ? s + ' · following' : c.follow_cut ? s + ' · cut: ' + c.follow_cut : s;
	}

	// One capture's account, as the list and the capture form show it.
	function row(c) {
		const t = traceOf(c);
		return el('tr', { class: 'cap-row', 'data-id': c.id, 'data-rule': c.rule || '' },
			el('td', { title: c.at }, U.time(c.at_ms).slice(5)),
			el('td', {}, c.rule ? el('span', {}, 'rule ', el('b', {}, c.rule)) : c.by.replace(/ [0-9a-f]{16,32}$/, '')),
			el('td', { class: 'mono' }, t ? el('a', { href: '/trace/' + t }, t) : '–'),
			el('td', { class: complete(c) ? 'ok-text' : 'bad' }, hostsText(c)),
			// a capture of a keep-mode query's events (fay capture --query): its events
			el('td', { class: 'num cap-stored' }, c.query ? `${c.events_found} events of ${c.query}` : c.spans_stored),
			el('td', { class: 'cap-late' }, lateText(c)),
			el('td', { class: 'num' }, c.rule ? U.dur(c.latency_ms * 1000) : '–'));
	}

	function table(caps, id) {
		return el('table', { class: 'grid', id },
			el('thead', {}, el('tr', {}, ['When', 'By', 'Trace', 'Hosts', 'Spans', 'Late spans', 'Latency'].map((h) => el('th', {}, h)))),
			el('tbody', {}, caps.map(row)));
	}

	// POST /api/captures with body; the account, or throws.
	function capture(body) {
		return U.api('/api/captures', { method: 'POST', headers: { 'Content-Type': 'application/json' },
			body: JSON.stringify(body) });
	}

	// A "capture this trace" button whose result goes to box.
	function button(id, box) {
		const b = el('button', { type: 'button', class: 'primary', id: 'cap-trace-go' }, 'Capture it from the hosts');
		b.addEventListener('click', async () => {
			b.disabled = true;
			try {
				const c = await capture({ trace_id: id });
				box.replaceChildren(el('div', { class: 'q-info', id: 'cap-result' },
					`Captured ${c.spans_stored} spans from ${hostsText(c)}. `,
					c.spans_stored ? el('a', { href: '/trace/' + id }, 'Show the trace') : 'No host holds it.'));
			} catch (e) {
				box.replaceChildren(U.errorBox(e));
			}
			b.disabled = false;
		});
		return b;
	}

	async function render(main) {
		const rules = el('div', { id: 'cap-rules' });
		const list = el('div', { id: 'cap-list' });
		const msg = el('div', { id: 'cap-msg' });
		const rmsg = el('div', { id: 'cap-rule-msg' });
		const tid = el('input', { id: 'cap-trace', placeholder: 'trace id (16 or 32 hex digits)', size: 34, class: 'mono' });
		const lastS = el('input', { id: 'cap-last', value: '30s', size: 6 });
		const host = el('input', { id: 'cap-host', placeholder: 'any host', size: 12 });
		const svc = el('input', { id: 'cap-service', placeholder: 'any service', size: 12 });
		const goTrace = el('button', { type: 'button', class: 'primary', id: 'cap-by-trace' }, 'Capture trace');
		const goLast = el('button', { type: 'button', class: 'primary', id: 'cap-by-last' }, 'Capture last');
		const rname = el('input', { id: 'cap-rule-name', placeholder: 'name (letters, digits, _)', size: 20 });
		const rexpr = el('input', { id: 'cap-rule-expr', placeholder: 'sp.duration > 100ms || sp.tag("error") != ""', size: 48, class: 'mono' });
		const rper = el('input', { id: 'cap-rule-per-s', value: '10', size: 4 });
		const rsettle = el('input', { id: 'cap-rule-settle', value: '300ms', size: 6 });
		const rfollow = el('input', { id: 'cap-rule-follow', value: '10s', size: 6 });
		const radd = el('button', { type: 'button', class: 'primary', id: 'cap-rule-add' }, 'Add rule');
		const field = (label, input) => el('label', { class: 'field' }, el('span', {}, label), input);
		main.append(el('h2', {}, 'Captures'),
			el('p', { class: 'muted' }, 'The flight recorder: processes started with FAY_RECORD=all record every request, and agents started with --flight keep the spans head sampling did not ship. A capture brings them back from every host and stores them, marked fay.capture.'),
			el('h3', {}, 'Capture now'),
			el('div', { class: 'toolbar' }, field('Trace', tid), goTrace),
			el('div', { class: 'toolbar' }, field('Last', lastS), field('Host', host), field('Service', svc), goLast),
			msg,
			el('h3', {}, 'Capture rules'),
			el('p', { class: 'muted' }, 'A rule is a FayQL predicate over spans, run by every agent on every span it drains; a match captures its whole trace after the settle time, then follows it for late spans (fay capture --when).'),
			rules,
			el('div', { class: 'toolbar' }, field('Name', rname), field('When', rexpr), field('Per second', rper), field('Settle', rsettle), field('Follow', rfollow), radd),
			rmsg,
			el('h3', {}, 'Recent captures'),
			el('p', { class: 'muted' }, 'The newest first (at most 256, kept across restarts of the collector). Hosts: those that answered of those asked; Late spans: stored by the follow rounds of a rule\'s capture; Latency: from the matching span\'s end to its trace stored.'),
			list);

		async function load() {
			const d = await U.load('/api/captures', list);
			if (!d) return;
			const rs = d.rules || [];
			rules.replaceChildren(rs.length ? el('table', { class: 'grid', id: 'cap-rule-table' },
				el('thead', {}, el('tr', {}, ['Name', 'When', 'Budget', 'Settle', 'Follow', 'Matches', 'Captures', 'Deduplicated', 'Over budget', 'Late spans', 'Running', ''].map((h) => el('th', {}, h)))),
				el('tbody', {}, rs.map((r) => el('tr', { 'data-name': r.name },
					el('td', {}, r.name),
					el('td', { class: 'mono' }, r.expr),
					el('td', { class: 'num' }, `${r.per_s}/s`),
					el('td', { class: 'num' }, U.dur(r.settle_ms * 1000)),
					el('td', { class: 'num' }, r.follow_ms ? U.dur(r.follow_ms * 1000) : 'off'),
					el('td', { class: 'num cap-matches' }, r.matches),
					el('td', { class: 'num cap-captures' }, r.captures),
					el('td', { class: 'num' }, r.deduplicated),
					el('td', { class: 'num' + (r.over_budget ? ' bad' : '') }, r.over_budget),
					el('td', { class: 'num' }, r.spans_late),
					el('td', { class: r.running ? 'ok-text' : 'bad' }, r.running ? 'yes' : 'no agent'),
					el('td', {}, el('button', { type: 'button', class: 'link cap-drop', onclick: () => drop(r.name) }, 'drop'))))))
				: el('p', { class: 'muted', id: 'cap-rules-none' }, 'No capture rule.'));
			list.replaceChildren(d.captures.length ? table(d.captures, 'cap-table')
				: el('p', { class: 'muted', id: 'cap-none' }, 'No capture yet.'));
		}

		async function drop(n) {
			if (!confirm(`Drop the capture rule ${n}?`)) return;
			try {
				await U.api('/api/captures/rules/' + encodeURIComponent(n), { method: 'DELETE' });
				rmsg.replaceChildren(el('div', { class: 'q-info' }, `Dropped ${n}.`));
			} catch (e) {
				rmsg.replaceChildren(U.errorBox(e));
			}
			await load();
		}

		async function run(body) {
			msg.replaceChildren(el('p', { class: 'muted' }, 'Capturing…'));
			try {
				const c = await capture(body);
				msg.replaceChildren(el('div', { class: 'q-info', id: 'cap-result' },
					`Capture ${c.id}: ${c.spans_stored} spans stored from ${hostsText(c)}.`));
			} catch (e) {
				msg.replaceChildren(U.errorBox(e));
			}
			await load();
		}
		goTrace.addEventListener('click', () => run({ trace_id: tid.value.trim() }));
		goLast.addEventListener('click', () => {
			const us = U.parseDur(lastS.value.trim());
			if (!(us >= 1000)) {
				msg.replaceChildren(U.errorBox(new Error('Last: a duration such as 30s, 500ms, 5m')));
				return;
			}
			const b = { last_ms: Math.round(us / 1000) };
			if (host.value.trim()) b.host = host.value.trim();
			if (svc.value.trim()) b.service = svc.value.trim();
			run(b);
		});
		radd.addEventListener('click', async () => {
			rmsg.replaceChildren();
			const ms = (v) => Math.round(U.parseDur(v.value.trim()) / 1000);
			try {
				await U.api('/api/captures/rules', { method: 'POST', headers: { 'Content-Type': 'application/json' },
					body: JSON.stringify({ name: rname.value.trim(), expr: rexpr.value, per_s: parseInt(rper.value, 10),
						settle_ms: ms(rsettle), follow_ms: ms(rfollow) }) });
				rmsg.replaceChildren(el('div', { class: 'q-info', id: 'cap-rule-added' }, `Rule ${rname.value.trim()} added.`));
				rname.value = '';
				rexpr.value = '';
			} catch (e) {
				rmsg.replaceChildren(el('div', { class: 'q-error', role: 'alert', id: 'cap-rule-error' },
					el('pre', { class: 'mono' }, e.message)));
			}
			await load();
		});
		await load();
		const timer = setInterval(load, 2000);
		return () => clearInterval(timer);
	}

	return { render, button, hostsText };
})();
