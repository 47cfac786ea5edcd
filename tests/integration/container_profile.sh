#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# s.container and s.cgroup on profile() samples (issue #25 item 4: the
# fields "on every source"; syscalls, function() in both modes and
# spans(...) have their tests in container_query.sh, inline_container_ids.sh
# and container_spans_query.sh).  Two containers (own pid and mount
# namespaces and root, unshare + chroot) in cgroups named as machined
# (machine-web\x2dPID.scope) and podman (libpod-ID.scope) name theirs, and
# a process on the host, each busy for about a second (3,000,000
# getppid() calls), under one `fay query -c`: profile(499) samples
# grouped by container name both containers and the host, and grouped by
# cgroup the two paths; nothing else (the command's shells are not
# sampled under another name: where comm == "ctr_work").
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/container_lib.bash"
ctr_two_cgroups fay-test
trap 'ctr_two_cgroups_rm; t_cleanup' EXIT
RA=$T_TMP/ra RB=$T_TMP/rb H=$T_TMP/h
ctr_root "$RA"
ctr_root "$RB"
mkdir -p "$H"
N=3000000
ctr_three "$T_TMP/three.sh" "/w $N now" "/w $N now" "$H $N now"

timeout 120 nice -n 10 "$FAY" query --json -c "sh $T_TMP/three.sh" \
	'from p in profile(499) where p.comm == "ctr_work" group p by p.container into g select { c: g.key, n: g.count() }' \
	>"$T_TMP/c.out" 2>"$T_TMP/c.err"
keys=$(grep -o '"c":"[^"]*"' "$T_TMP/c.out" | sort | tr '\n' ' ')
want=$(printf '"c":"%s"\n' "" "${ID:0:12}" "$WEB" | sort | tr '\n' ' ')
[ "$keys" = "$want" ] && ! grep -q '"n":0}' "$T_TMP/c.out" &&
	pass "profile(499) grouped by container: $WEB, ${ID:0:12} and the host (''), each sampled" ||
	fail "profile(499) grouped by container" "got: $(cat "$T_TMP/c.out")" "want: $want" "$(cat "$T_TMP/c.err")"

timeout 120 nice -n 10 "$FAY" query --json -c "sh $T_TMP/three.sh" \
	'from p in profile(499) where p.comm == "ctr_work" && p.container != "" group p by p.cgroup into g select { c: g.key, n: g.count() }' \
	>"$T_TMP/g.out" 2>"$T_TMP/g.err"
a=${CG_A#"$CGR"} b=${CG_B#"$CGR"}
# (a path longer than 63 bytes keeps its end, "..." first: docs/QUERY.md)
[ ${#b} -le 63 ] || b="...${b: -60}"
grep -qF "\"c\":\"$(printf '%s' "$a" | sed 's/\\/\\\\/g')\"" "$T_TMP/g.out" && grep -qF "\"c\":\"$b\"" "$T_TMP/g.out" &&
  [ "$(grep -c . "$T_TMP/g.out")" = 2 ] &&
	pass "profile(499) grouped by cgroup: the two containers' paths" ||
	fail "profile(499) grouped by cgroup" "got: $(cat "$T_TMP/g.out")" "want: $a, $b" "$(cat "$T_TMP/g.err")"

ctr_none_left "$RA" "$H"
done_testing
