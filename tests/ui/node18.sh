#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Debian 12's own nodejs is 18: every npm package the tests and the UI
# build use (ui/ and tests/otlp/ package-lock.json) must admit Node 18.20 by its "engines"
# field (playwright-core 1.65 asks for >= 20 and stopped make check on a
# stock Debian 12; #11).  The browser tests themselves were run under
# Debian's node 18.20.4 when the pin was chosen (tests/ui/ui_browser.sh).
. "$(dirname "$0")/../lib/lib.sh"
TOP=$(cd "$(dirname "$0")/../.." && pwd)
for lock in ${LOCK:-$TOP/ui/package-lock.json $TOP/tests/otlp/package-lock.json}; do
out=$(python3 - "$lock" <<'PY'
import json, re, sys
lock = json.load(open(sys.argv[1]))
bad = 0
def admits(rng, v=(18, 20, 4)):
    # Each '||' alternative is a list of comparators, all of which must hold.
    rng = re.sub(r"(>=|<=|>|<|\^|~|=)\s+", r"\1", rng).replace("*", "x")
    for alt in rng.split("||"):
        okall = True
        for c in alt.split():
            m = re.fullmatch(r"(>=|<=|>|<|\^|~|=)?v?(\d+)(?:\.(\d+|x))?(?:\.(\d+|x))?", c.strip())
            if not m:
                okall = False; break
            op = m.group(1) or "="
            want = tuple(int(x) if x and x != "x" else 0 for x in m.group(2, 3, 4))
            if op == ">=": okall &= v >= want
            elif op == ">": okall &= v > want
            elif op == "<=": okall &= v <= want
            elif op == "<": okall &= v < want
            elif op == "^": okall &= v[0] == want[0] and v >= want
            elif op == "~": okall &= v[:2] == want[:2] and v >= want
            else:
                okall &= v[0] == want[0] if m.group(3) in (None, "x") else v[:2] == want[:2]
        if okall:
            return True
    return False
for name, p in lock.get("packages", {}).items():
    rng = p.get("engines", {}).get("node") if isinstance(p.get("engines"), dict) else None
    if rng:
        good = admits(rng)
        print(("ok" if good else "BAD"), name, rng)
        bad += not good
sys.exit(1 if bad else 0)
PY
)
rc=$?
while IFS= read -r l; do diag "$l"; done <<<"$out"
ok "every package in ${lock#$TOP/} admits Node 18.20" test $rc -eq 0
done
ok "ui/'s lock pins playwright-core" grep -q '"node_modules/playwright-core"' "$TOP/ui/package-lock.json"
done_testing
