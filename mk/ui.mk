# SPDX-License-Identifier: MIT
# The collector's web UI: ui/ (plain HTML/CSS/JS) plus uPlot from npm,
# embedded into the fay binary as byte arrays (tools/ui-embed), so the UI
# works offline and nothing is fetched at run time.
#
#   ui/package.json, ui/package-lock.json   npm dev dependencies: uPlot
#        (copied into the binary), playwright-core (browser tests, drives
#        Debian's chromium), zipkin + zipkin-transport-http (ingest test)
#   $(B)/gen/ui_assets.c   generated; linked into libfay-internal.a
#
# npm ci runs when ui/node_modules is missing or older than the lockfile.
# Without the registry the UI is still built, without uPlot: the dashboard
# then draws its charts with its own small SVG fallback.

UI_EMBED   := $(B)/tools/ui-embed
UI_GEN     := $(B)/gen/ui_assets.c
UI_OBJ     := $(B)/obj/gen/ui_assets.o
UI_NPM     := ui/node_modules/.package-lock.json
UI_UPLOT   := ui/node_modules/uplot/dist
UI_PAGES   := ui/index.html $(wildcard ui/*.css ui/js/*.js ui/*.svg)

# URL path of each source file: ui/index.html -> /index.html, ui/X -> /ui/X
ui_url = $(if $(filter ui/index.html,$(1)),/index.html,/$(1))

$(UI_NPM): ui/package.json ui/package-lock.json
	$(call msg,NPM-CI,ui/node_modules)
	$(Q)cd ui && if command -v npm >/dev/null 2>&1; then \
		flock .npm-ci.lock npm ci --no-audit --no-fund --loglevel=error >/dev/null || \
		echo "warning: npm ci failed in ui/: building the UI without uPlot" >&2; \
	else echo "warning: npm not found (scripts/install-deps): building the UI without uPlot" >&2; fi
	$(Q)[ ! -d ui/node_modules ] || touch $@

$(UI_EMBED): tools/ui-embed.c
	$(call msg,HOSTCC,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< -lz

# ui and ui/js themselves: a file added or removed changes the list even
# when the file's own time is older than the last embed
$(UI_GEN): $(UI_EMBED) $(UI_PAGES) ui ui/js mk/ui.mk | $(UI_NPM)
	$(call msg,EMBED,$@)
	@mkdir -p $(@D)
	$(Q)vendor=""; \
	for f in uPlot.iife.min.js uPlot.min.css; do \
		[ -f $(UI_UPLOT)/$$f ] && vendor="$$vendor /ui/vendor/$$f=$(UI_UPLOT)/$$f"; \
	done; \
	$(UI_EMBED) $@ $(foreach f,$(UI_PAGES),$(call ui_url,$(f))=$(f)) $$vendor

$(UI_OBJ): $(UI_GEN) src/collector/ui_assets.h
	$(call msg,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# The archive's recipe takes $^: the generated object joins it.
$(LIBINT): $(UI_OBJ)

# Test binary: fay with a stand-in query engine (tests/ui/fake_qengine.c)
# for the live-query UI test of the streaming path.  Not installed.
UI_FAKEQ := $(B)/tests/fay-ui-fakeq

$(UI_FAKEQ): $(CLI_OBJ) tests/ui/fake_qengine.c src/engine/qengine.h $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ tests/ui/fake_qengine.c $(CLI_OBJ) \
		$(LIBINT) $(LDLIBS)

all: $(UI_FAKEQ)
