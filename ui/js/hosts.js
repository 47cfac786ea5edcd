// SPDX-License-Identifier: MIT
// fay UI: the agents this collector knows, from the HELLO and STATS
// frames it keeps per agent: up/down, version, records lost on the host
// (by reason), probes attached; and the query connections of the cluster
// (GET /api/cluster/peers): each host's kernel and BTF, and for every
// cluster query it was asked to run, its state and the probes it attached;
// and the OTLP senders (per client address: requests, spans accepted and
// rejected).  A standing query that categorizes hosts (categorize HOST by
// ... into K) colours each host by its category in its last window, with
// the categories' distinguishing features.  Each agent's containers
// (those with live traced processes, from its stats: the tag its spans
// carry, their services) are a column, each a link to their traces; the
// container filter keeps the hosts running a container that matches.
// "Capture the last N s" dumps every host's flight buffer (POST
// /api/captures {"last_ms"}).
'use strict';

const Hosts = (() => {
	const { el } = U;

	async function render(main) {
		const out = el('div', { id: 'hosts' });
		const cl = el('div', { id: 'cluster' });
		const ot = el('div', { id: 'otlp-senders' });
		const cats = el('div', { id: 'host-categories' });
		let hostCat = new Map();	// host -> [{query, category, changed}]
		const ctrFilter = el('input', { id: 'container-filter', type: 'search', placeholder: 'container or service', size: 24 });
		// the flight recorder's dump: every host's last N seconds
		const capLast = el('input', { id: 'hosts-cap-last', value: '30s', size: 6, 'aria-label': 'capture window' });
		const capBox = el('span', { id: 'hosts-cap-msg' });
		const capGo = el('button', { type: 'button', id: 'hosts-cap-go' }, 'Capture');
		capGo.addEventListener('click', async () => {
			const us = U.parseDur(capLast.value.trim());
			if (!(us >= 1000)) {
				capBox.replaceChildren(U.errorBox(new Error('a duration such as 30s, 500ms, 5m')));
				return;
			}
			capGo.disabled = true;
			try {
				const c = await U.api('/api/captures', { method: 'POST', headers: { 'Content-Type': 'application/json' },
					body: JSON.stringify({ last_ms: Math.round(us / 1000) }) });
				capBox.replaceChildren(el('span', { class: 'q-info' }, `${c.spans_stored} spans stored from ${Captures.hostsText(c)}`), ' ',
					el('a', { href: '/captures' }, 'captures'));
			} catch (e) {
				capBox.replaceChildren(U.errorBox(e));
			}
			capGo.disabled = false;
		});
		main.append(el('h2', {}, 'Hosts'), el('p', { class: 'muted' }, 'Agents that spoke to this collector. Up: connected and heard from in the last 2 minutes.'),
			el('div', { class: 'toolbar' }, el('span', {}, 'Capture the last '), capLast,
				el('span', { class: 'muted' }, ' of every host\'s flight buffer '), capGo, capBox),
			el('label', { class: 'field ctr-filter' }, el('span', {}, 'Container'), ctrFilter), out, cats,
			el('h3', {}, 'OTLP senders'), el('p', { class: 'muted' }, 'Clients that sent OTLP (HTTP or gRPC), by address: spans stored, and spans rejected (invalid, or refused while the ingest queue was full).'), ot,
			el('h3', {}, 'Cluster queries'), el('p', { class: 'muted' }, 'Hosts connected for queries (agents, and child collectors with their hosts), and what each runs for the cluster and standing queries.'), cl);
		async function loadCluster() {
			const d = await U.load('/api/cluster/peers', cl);
			if (!d) return;
			if (!d.peers.length) {
				cl.replaceChildren(el('p', { class: 'muted', id: 'cluster-none' }, 'No host is connected for queries.'));
				return;
			}
			cl.replaceChildren(el('table', { class: 'grid', id: 'cluster-table' },
				el('thead', {}, el('tr', {}, ['Host', 'Role', 'Address', 'Kernel', 'BTF', 'Queries and probes'].map((h) => el('th', {}, h)))),
				el('tbody', {}, d.peers.map((p) => el('tr', { 'data-host': p.host },
					el('td', {}, p.host),
					el('td', {}, p.collector ? 'collector' : 'agent'),
					el('td', { class: 'mono' }, p.peer),
					el('td', { class: 'mono' }, p.kernel || '–'),
					el('td', {}, p.btf === null ? '–' : p.btf ? 'yes' : 'no'),
					el('td', {}, p.queries.length ? p.queries.map((q) => el('div', { class: 'cluster-q', 'data-state': q.state, title: q.query },
						el('span', { class: 'state ' + (q.state === 'failed' ? 'bad' : q.state === 'attached' ? 'ok-text' : '') }, q.state),
						` #${q.qid} `, el('span', { class: 'mono' }, q.probes || '–'))) : el('span', { class: 'muted' }, 'none')))))));
		}
		// Standing queries that categorize: their last window's categories.
		async function loadCategories() {
			let qs;
			try { qs = await U.api('/api/queries'); } catch (e) { qs = []; }
			const m = new Map(), boxes = [];
			for (const q of Array.isArray(qs) ? qs : []) {
				const w = q.last;
				if (!w || !w.categories || !q.columns) continue;
				const moved = new Map((w.changed || []).map((c) => [c.entity, c]));
				const ent = (q.columns[w.entity_column] || {}).name || '?';
				for (const c of w.categories)
					for (const h of c.members) {
						if (!m.has(h)) m.set(h, []);
						m.get(h).push({ query: q.name, category: c.category, changed: moved.get(h) });
					}
				boxes.push(el('div', { class: 'cat-box', 'data-query': q.name },
					el('h3', {}, `Categories of ${ent} (standing query ${q.name})`),
					el('table', { class: 'grid' },
						el('thead', {}, el('tr', {}, ['Category', 'Members', 'Distinguishing'].map((h) => el('th', {}, h)))),
						el('tbody', {}, w.categories.map((c) => el('tr', { 'data-category': c.category },
							el('td', {}, el('span', { class: 'chip', style: `--c:${U.colour('category ' + c.category)}` }, String(c.category))),
							el('td', {}, c.members.join(' ')),
							el('td', {}, c.top.map((f) => w.pivot ? `${f} ${Math.round(c.centroid[f] * 100)}%` :
								`${f} ${c.centroid[f] >= 0 ? '+' : ''}${c.centroid[f].toFixed(1)}sd`).join(', ')))))),
					w.changed && w.changed.length ? el('p', { class: 'muted' }, 'changed: ' +
						w.changed.map((c) => `${c.entity} ${c.from} → ${c.to}`).join(', ')) : null));
			}
			hostCat = m;
			cats.replaceChildren(...boxes);
		}
		function catCell(host) {
			const l = hostCat.get(host);
			if (!l) return el('span', { class: 'muted' }, '–');
			return el('span', {}, l.map((x) => el('span', { class: 'chip host-cat', title: `${x.query}: category ${x.category}` +
				(x.changed ? ` (was ${x.changed.from})` : ''), style: `--c:${U.colour('category ' + x.category)}` },
				`${x.category}${x.changed ? ' (changed)' : ''}`)));
		}
		// An agent's containers: [{name, tag, processes, services}].
		function containersOf(a) {
			const live = ((a.stats || {}).containers || {}).live || {};
			return Object.entries(live).map(([name, c]) => ({ name, tag: c.tag, processes: c.processes, services: c.services || [] }));
		}
		function ctrCell(cs) {
			if (!cs.length) return el('span', { class: 'muted' }, '–');
			return el('span', {}, cs.map((c) => el('div', { class: 'ctr', 'data-container': c.name },
				el('a', { class: 'chip', href: '/traces?annotationQuery=' + encodeURIComponent(`${c.tag}=${c.name}`) + '&lookback=86400000&limit=20',
					title: `${c.tag}=${c.name}: ${c.processes} traced process${c.processes === 1 ? '' : 'es'}; its traces`,
					style: `--c:${U.colour('container ' + c.name)}` }, c.tag === 'container.id' ? c.name.slice(0, 12) : c.name),
				' ', el('span', { class: 'muted' }, c.services.join(', ')))));
		}
		function applyFilter() {
			const f = ctrFilter.value.trim().toLowerCase();
			for (const tr of out.querySelectorAll('tr[data-agent]')) {
				const cs = tr.getAttribute('data-containers') || '';
				tr.hidden = !!f && !cs.toLowerCase().includes(f);
			}
		}
		ctrFilter.addEventListener('input', applyFilter);
		async function load() {
			await loadCategories();
			const d = await U.load('/api/ui/hosts', out);
			if (!d) return;
			const ss = d.otlp_senders || [];
			ot.replaceChildren(ss.length ? el('table', { class: 'grid', id: 'otlp-table' },
				el('thead', {}, el('tr', {}, ['Sender', 'Requests', 'Spans stored', 'Spans rejected', 'Requests refused'].map((h) => el('th', {}, h)))),
				el('tbody', {}, ss.map((x) => el('tr', { 'data-sender': x.sender },
					el('td', { class: 'mono' }, x.sender),
					el('td', { class: 'num' }, x.requests),
					el('td', { class: 'num' }, x.spans_accepted),
					el('td', { class: 'num' + (x.spans_rejected ? ' bad' : '') }, x.spans_rejected),
					el('td', { class: 'num' + (x.requests_refused ? ' bad' : '') }, x.requests_refused))))) :
				el('p', { class: 'muted', id: 'otlp-none' }, 'No OTLP client has sent spans yet (POST /v1/traces, or gRPC TraceService/Export).'));
			if (!d.agents.length) {
				out.replaceChildren(el('p', { class: 'muted' }, 'No agent has connected yet. Start one with: fay agent --collector HOST:9410'));
				return;
			}
			const t = el('table', { class: 'grid', id: 'hosts-table' },
				el('thead', {}, el('tr', {}, ['', 'Host', 'Category', 'Containers', 'Agent', 'Version', 'Address', 'Last seen', 'Batches', 'Spans', 'Lost', 'Probes', ''].map((h) => el('th', {}, h)))));
			const tb = el('tbody');
			for (const a of d.agents) {
				const lost = Object.entries(a.lost_by_reason || {}).filter(([, v]) => v > 0);
				const raw = el('tr', { class: 'raw', hidden: true }, el('td', { colspan: 13 }, el('pre', {}, JSON.stringify(a.stats, null, 2))));
				const cs = containersOf(a);
				tb.append(el('tr', { 'data-agent': a.id, class: a.up ? 'up' : 'down',
					'data-containers': cs.map((c) => [c.name, ...c.services].join(' ')).join(' ') },
					el('td', {}, el('span', { class: 'dot ' + (a.up ? 'up' : 'down'), title: a.up ? 'up' : 'down' }), a.up ? ' up' : ' down'),
					el('td', {}, a.host || '?'),
					el('td', { class: 'host-cat-cell' }, catCell(a.host)),
					el('td', { class: 'ctr-cell' }, ctrCell(cs)),
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
			applyFilter();
		}
		await Promise.all([load(), loadCluster()]);
		const timer = setInterval(() => { load(); loadCluster(); }, 5000);
		return () => clearInterval(timer);
	}

	return { render };
})();
