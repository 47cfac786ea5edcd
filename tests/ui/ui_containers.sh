#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Containers in the web UI (issue #25 item 3), in Debian's chromium
# (playwright-core), against a real collector and a real agent draining a
# real container: a libfay program (span_producer) in its own pid and
# mount namespaces and root (unshare + chroot, a tmpfs on its /dev/shm),
# in a cgroup named as systemd-nspawn/machined name theirs
# (machine-web\x2d1.scope).  The Hosts page lists web-1 with its service
# in the agent's row, the container filter keeps or hides the row, the
# container's link lists its traces, and a span's detail names its
# container.  tests/ui/containers.mjs; screenshots in $FAY_UI_IMG
# (default $BUILD/test-logs/ui-img).
. "$(dirname "$0")/../lib/lib.sh"
need_root
. "$(dirname "$0")/../integration/collector_lib.bash"
. "$(dirname "$0")/../integration/container_lib.bash"
. "$(dirname "$0")/lib.bash"
[ -x /usr/bin/chromium ] || skip_all "needs Debian's chromium (scripts/install-deps)"
SP=$BUILD/tests/bin/span_producer
[ -x "$SP" ] || skip_all "span_producer is not built (make)"
CGR=$(findmnt -n -t cgroup2 -o TARGET | head -1)
[ -n "$CGR" ] && [ -w "$CGR" ] || skip_all "no writable cgroup2 file system (the container tags come from cgroups)"
ui_npm

BASE=$CGR/fay-ui-$$
CG=$BASE/machine.slice/'machine-web\x2d1.scope'
mkdir -p "$CG" || skip_all "cannot make cgroups under $CGR"
R=$T_TMP/root
trap 'touch "$R/w/stop"; sleep 0.3; for p in $(cat "$CG/cgroup.procs" 2>/dev/null); do kill $p; done; sleep 0.2;
	rmdir "$CG" "$BASE/machine.slice" "$BASE" 2>/dev/null; t_cleanup' EXIT

coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
mkdir -p "$T_TMP/alpha"
"$FAY" agent --collector 127.0.0.1:$WP --host alpha --shm-dir "$T_TMP/alpha" --state-dir "$T_TMP/alpha" \
	--containers-in "/fay-ui-$$" --stats-interval 300ms >>"$T_TMP/alpha.log" 2>&1 &
T_PIDS+=($!)
ok "an agent with a query connection" wait_for 30 coll_peers alpha

ctr_root "$R"
cp "$SP" "$R/bin/span_producer"
mkdir -p "$R/dev/shm"
N=40
bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$CG" \
	timeout 300 nice -n 10 unshare -p -m -f --mount-proc="$R/proc" \
	sh -c 'mount -t tmpfs -o mode=1777,size=64m fayshm "$0/dev/shm" && exec chroot "$0" "$@"' \
	"$R" /bin/span_producer --count $N --service ctr-web --ready /w/ready --hold /w/stop \
	>"$T_TMP/ctr.out" 2>&1 &
T_PIDS+=($!)
ok "the container's program made its spans" wait_for 60 test -e "$R/w/ready"
stored() { [ "$(curl -s "$URL/api/v2/traces?serviceName=ctr-web&limit=1000" | grep -o '"container.name":"web-1"' | wc -l)" -eq $N ]; }
ok "its $N spans stored with container.name=web-1" wait_for 60 stored

IMG=${FAY_UI_IMG:-$BUILD/test-logs/ui-img}
URL=$URL IMG_DIR=$IMG N=$N node "$TOP/tests/ui/containers.mjs" >"$T_TMP/tap" 2>&1
relay_tap "$T_TMP/tap"
ok "collector still up" coll_alive
diag "screenshots in $IMG"
done_testing
