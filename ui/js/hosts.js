// SPDX-License-Identifier: MIT
// fay UI: the agents this collector knows, from the HELLO and STATS
// frames it keeps per agent: up/down, version, records lost on the host
// (by reason), probes attached.
'use strict';

const Hosts = (() => {
	const { el } = U;

	async function render(main) {
		const out = el('div', { id: 'hosts' });
		main.append(el('h2', {}, 'Hosts'), el('p', { class: 'muted' }, 'Agents that spoke to this collector. Up: connected and heard from in the last 2 minutes.'), out);
		async function load() {
			let d;
			try {
				d = await U.api('/api/ui/hosts');
			} catch (e) {
				out.replaceChildren(U.errorBox(e));
				return;
			}
			if (!d.agents.length) {
				out.replaceChildren(el('p', { class: 'muted' }, 'No agent has connected yet. Start one with: fay agent --collector HOST:9410'));
				return;
			}
			const t = el('table', { class: 'grid', id: 'hosts-table' },
				el('thead', {}, el('tr', {}, ['', 'Host', 'Agent', 'Version', 'Address', 'Last seen', 'Batches', 'Spans', 'Lost', 'Probes', ''].map((h) => el('th', {}, h)))));
			const tb = el('tbody');
			for (const a of d.agents) {
				const lost = Object.entries(a.lost_by_reason || {}).filter(([, v]) => v > 0);
				const raw = el('tr', { class: 'raw', hidden: true }, el('td', { colspan: 11 }, el('pre', {}, JSON.stringify(a.stats, null, 2))));
				tb.append(el('tr', { 'data-agent': a.id, class: a.up ? 'up' : 'down' },
					el('td', {}, el('span', { class: 'dot ' + (a.up ? 'up' : 'down'), title: a.up ? 'up' : 'down' }), a.up ? ' up' : ' down'),
					el('td', {}, a.host || '?'),
					el('td', { class: 'mono' }, a.id.slice(0, 12)),
					el('td', {}, a.version || '–'),
					el('td', { class: 'mono' }, a.peer || '–'),
					el('td', {}, a.last_seen_ms ? U.ago(a.last_seen_ms) : '–'),
					el('td', { class: 'num' }, a.batches),
					el('td', { class: 'num' }, a.spans),
					el('td', { class: 'num' + (a.lost ? ' bad' : ''), title: lost.map(([k, v]) => `${k}: ${v}`).join('\n') || 'nothing lost' },
						a.lost, lost.length ? el('div', { class: 'lost-why' }, lost.map(([k, v]) => `${k} ${v}`).join(', ')) : null),
					el('td', {}, a.probes.length ? a.probes.map((p) => el('div', {}, p.name || JSON.stringify(p), p.hits !== undefined ? ` (${p.hits} hits)` : '')) : el('span', { class: 'muted' }, 'none')),
					el('td', {}, a.stats ? el('button', { type: 'button', class: 'link', onclick: () => { raw.hidden = !raw.hidden; } }, 'stats') : null)),
				raw);
			}
			t.append(tb);
			out.replaceChildren(t);
		}
		await load();
		const timer = setInterval(load, 5000);
		return () => clearInterval(timer);
	}

	return { render };
})();
