# SPDX-License-Identifier: MIT
# Sourced by tests/integration/otlp_*.sh (not a test itself: .bash): node and
# the OpenTelemetry JS SDK of tests/otlp (npm ci from its lockfile when
# tests/otlp/node_modules is missing; make tests does the same).
OTLP_DIR=$TOP/tests/otlp
OTLP_CLIENT=$OTLP_DIR/otlp_client.js

command -v node >/dev/null || skip_all "needs node (scripts/install-deps)"
if [ ! -f "$OTLP_DIR/node_modules/.package-lock.json" ]; then
	command -v npm >/dev/null || skip_all "needs npm (scripts/install-deps)"
	(cd "$OTLP_DIR" && flock .npm-ci.lock npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1) ||
		skip_all "npm ci failed in tests/otlp (no registry?)"
fi

# otlp_node WHAT ARGS...: run otlp_client.js; its complaints become the
# test's diagnostics.
otlp_node() {
	local what=$1; shift
	if timeout 60 node "$OTLP_CLIENT" "$@" >"$T_TMP/node.out" 2>"$T_TMP/node.err"; then
		pass "$what"
	else
		local IFS=$'\n'
		fail "$what" $(head -40 "$T_TMP/node.err")
	fi
}
