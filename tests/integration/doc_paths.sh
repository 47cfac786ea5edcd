#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The map and the component READMEs name only files that exist
# (scripts/doc-paths): a file moved or renamed without its documents fails
# here.  A planted wrong name shows the check can fail.
. "$(dirname "$0")/../lib/lib.sh"
command -v python3 >/dev/null || skip_all "needs python3"
cd "$TOP" || exit 1
command -v git >/dev/null && git rev-parse --show-toplevel >/dev/null 2>&1 ||
	skip_all "needs a git checkout (scripts/doc-paths reads git ls-files)"

for doc in docs/ARCHITECTURE.md src/*/README.md; do
	if out=$(scripts/doc-paths "$doc" 2>&1); then
		pass "$doc names existing files"
	else
		fail "$doc names files that do not exist" "$out"
	fi
done

printf 'see `src/agent/no_such_file.c` and no_such_file.h\n' >"$T_TMP/bad.md"
out=$(scripts/doc-paths "$T_TMP/bad.md" 2>&1)
rc=$?
ok "a wrong path and a wrong name are both reported" \
	bash -c '[ "$1" -eq 1 ] && grep -q "src/agent/no_such_file.c" <<<"$2" && grep -q "no_such_file.h:" <<<"$2"' _ "$rc" "$out"
done_testing
