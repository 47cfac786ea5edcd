# SPDX-License-Identifier: MIT
# Shared by tests/ui/*.sh (not a test itself: .bash): node, the npm dev dependencies of ui/ (npm ci
# from the lockfile when ui/node_modules is missing), Debian's chromium.
UI_DIR=$TOP/ui

command -v node >/dev/null || skip_all "needs node (scripts/install-deps)"
ui_npm() {
	if [ ! -d "$UI_DIR/node_modules/playwright-core" ] || [ ! -d "$UI_DIR/node_modules/zipkin" ]; then
		command -v npm >/dev/null || skip_all "needs npm (scripts/install-deps)"
		(cd "$UI_DIR" && flock .npm-ci.lock npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1) ||
			skip_all "npm ci failed in ui/ (no registry?)"
	fi
	export NODE_PATH=$UI_DIR/node_modules
}

# relay_tap FILE: the TAP lines of a node script, renumbered into this test.
relay_tap() {
	local l
	while IFS= read -r l; do
		case "$l" in
		"ok "*) pass "${l#* - }" ;;
		"not ok "*) fail "${l#* - }" ;;
		"#"*) echo "$l" ;;
		esac
	done <"$1"
	grep -q "^1\.\." "$1" || fail "the node script finished" "$(tail -25 "$1")"
}
