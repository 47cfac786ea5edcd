# SPDX-License-Identifier: MIT
# The checks of a categorize query's --json output where six hosts h1..h6
# fall in three kinds, two each, and h6 turns into h1's kind during the
# query (cluster_categorize.sh, cluster_categorize_netns.sh).  Source it
# after tests/lib/lib.sh; categorize_six OUT [GO_NS] writes OUT.verdict,
# makes the checks below, and leaves v NAME to read a verdict line.  With
# GO_NS (when the workloads were let go, ns since the epoch), the windows
# that began before it are left out (the hosts all waited alike: on a
# loaded machine a whole window can pass between the attach and the go),
# and so are the changes the first window after it reports against them:
#   windows N       windows with all six hosts
#   exact N         of those, how many split them {h1 h2}{h3 h4}{h5 h6}
#                   (before h6 turned) or {h1 h2 h6}{h3 h4}{h5} (after)
#   first_before, last_after   True/False
#   h6_changed      True when the only change reported is h6's, once,
#                   from h5's category in the first window to h1's in
#                   the last
#   changes JSON    every change reported
#   tops JSON       the first full window's distinguishing features by
#                   members ("h1 h2": [...])
v() { sed -n "s/^$1 //p" "$CATEGORIZE_VERDICT"; }
categorize_six() {
	CATEGORIZE_VERDICT=$1.verdict
	python3 - "$1" "${2:-0}" >"$CATEGORIZE_VERDICT" <<'EOF'
import json
import sys


lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
go = int(sys.argv[2])
wins = [w for w in lines if "categories" in w]
if go:
    wins = [w for w in wins if w.get("window_start_ns", 0) >= go]
    if wins:
        wins[0] = dict(wins[0], changed=[])    # against a window before the go


def part(w):
    return sorted(sorted(c["members"]) for c in w["categories"])


def cat(w, h):
    for c in w["categories"]:
        if h in c["members"]:
            return c["category"]


before = [["h1", "h2"], ["h3", "h4"], ["h5", "h6"]]
after = [["h1", "h2", "h6"], ["h3", "h4"], ["h5"]]
full = [w for w in wins if sum(len(c["members"]) for c in w["categories"]) == 6]
ch = [c for w in wins for c in w["changed"]]
print("windows", len(full))
print("exact", sum(part(w) in (before, after) for w in full))
print("first_before", bool(full) and part(full[0]) == before)
print("last_after", bool(full) and part(full[-1]) == after)
print("h6_changed", len(ch) == 1 and ch[0]["entity"] == "h6" and bool(full)
      and ch[0]["from"] == cat(full[0], "h5") and ch[0]["to"] == cat(full[-1], "h1"))
print("changes", json.dumps(ch))
tops = {}
for c in (full[0]["categories"] if full else []):
    tops[" ".join(sorted(c["members"]))] = c.get("top", [])
print("tops", json.dumps(tops))
EOF
	ok "5 or more windows with all six hosts ($(v windows))" [ "$(v windows)" -ge 5 ]
	ok "every window: the three kinds of host exactly ($(v exact) of $(v windows))" \
		[ "$(v exact)" = "$(v windows)" ]
	ok "the first window: h5 and h6 together" [ "$(v first_before)" = True ]
	ok "the last window: h6 with h1 and h2" [ "$(v last_after)" = True ]
	ok "h6 reported changed once, nobody else ($(v changes))" [ "$(v h6_changed)" = True ]
	[ "$(v exact)" = "$(v windows)" ] || diag "$(grep categories "$1" | head -20)"
}
