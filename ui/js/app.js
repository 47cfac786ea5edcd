// SPDX-License-Identifier: MIT
// fay UI: the router.  Every page has a real path served by the
// collector (/traces, /trace/ID, /dependencies, /dashboard, /query,
// /hosts, /queries, /queries/NAME, /captures), so links can be shared and pages reloaded.
'use strict';

(() => {
	const main = document.getElementById('main');
	let cleanup = null;

	const routes = [
		[/^\/(?:traces|index\.html)?$/, 'traces', () => Traces.render(main)],
		[/^\/trace\/([0-9a-fA-F]{1,32})$/, 'traces', (m) => Waterfall.render(main, m[1])],
		[/^\/dependencies$/, 'dependencies', () => Deps.render(main)],
		[/^\/dashboard$/, 'dashboard', () => Dashboard.render(main)],
		[/^\/query$/, 'query', () => Query.render(main)],
		[/^\/hosts$/, 'hosts', () => Hosts.render(main)],
		[/^\/queries(?:\/([A-Za-z0-9_]{1,64}))?$/, 'queries', (m) => Queries.render(main, m[1])],
		[/^\/captures$/, 'captures', () => Captures.render(main)],
	];

	function show() {
		if (cleanup) {
			try { cleanup(); } catch (e) { /* a page's timer */ }
			cleanup = null;
		}
		main.replaceChildren();
		const path = location.pathname;
		for (const [re, page, fn] of routes) {
			const m = re.exec(path);
			if (!m) continue;
			for (const a of document.querySelectorAll('#nav a'))
				a.classList.toggle('active', a.dataset.page === page);
			cleanup = fn(m) || null;
			if (cleanup && typeof cleanup.then === 'function') {
				const p = cleanup;
				cleanup = null;
				p.then((c) => { if (typeof c === 'function') cleanup = c; })
					.catch((e) => main.append(U.errorBox(e)));
			}
			return;
		}
		main.append(U.el('h2', {}, 'Not found'), U.el('p', {}, `No page at ${path}.`));
	}

	// Internal links navigate without a reload.
	document.addEventListener('click', (ev) => {
		const a = ev.target.closest('a');
		if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey ||
		    ev.shiftKey || a.target) return;
		const href = a.getAttribute('href');
		if (!href || !href.startsWith('/') || href.startsWith('/api/') ||
		    href.startsWith('/ui/') || href === '/metrics') return;
		ev.preventDefault();
		U.go(href);
	});
	window.addEventListener('popstate', show);
	window.addEventListener('fay:navigate', show);

	fetch('/health').then((r) => r.json()).then((h) => {
		const st = h.store || {};
		const disk = h.disk || {};
		const down = (st.status === 'DOWN' ? ` · store ${st.backend} DOWN: ${st.error || ''}` : '') +
			(disk.status === 'LOW' ? ` · ${disk.error || 'disk low'}` : '');
		const el = document.getElementById('status');
		el.textContent = `collector ${h.version} · up ${h.uptime_s}s${down}`;
		el.classList.toggle('down', !!down);
	}).catch(() => {
		document.getElementById('status').textContent = 'collector unreachable';
	});
	show();
})();
