# SPDX-License-Identifier: MIT
# Helpers of the container tests (issue #25), sourced after lib.sh.
#   ctr_root DIR: a small root file system in DIR: ctr_work in /bin, its
#     libraries COPIED into /usr/lib/x86_64-linux-gnu (another file, another
#     inode than the host's libc: a uprobe on the host's file never fires
#     in it), the loader in /lib64, /lib -> usr/lib, /w (the workload's
#     files: systemd-nspawn mounts a tmpfs on /tmp), /tmp /run /proc /dev;
#     with CTR_WORK_NAME set, ctr_work also as /bin/$CTR_WORK_NAME.
#   ctr_start DIR N: ctr_work /w N in DIR as root, in its own pid and
#     mount namespaces: CTR_RUNTIME=unshare (the default: unshare -p -m -f
#     --mount-proc + chroot, what a runtime does) or nspawn (systemd-nspawn,
#     pivot_root: its root is not under fay's) or podman (an image of
#     ctr_podman_image); its host pid in CPID once
#     it wrote /w/ready (its pid in its namespace in CVPID).  CTR_ARGS:
#     more arguments of ctr_work (unshare only).
#   ctr_check MODE CMD N WHAT: fay query -c CMD "$Q" answers n = N.
#   ctr_go DIR / ctr_done DIR / ctr_stop DIR: let it call, wait until it
#     called, let it exit.
#   ctr_none_left ROOT STR: a test point: no ctr_work is left (stopped or
#     running) whose root is ROOT or whose command line has STR.
#   ctr_cgroup_base NAME [C]: BASE, a cgroup path $CGR/NAME-$$ to make
#     the test's cgroups under, and ID, a 64-digit container id of this
#     run (C fills what is not a hex digit); skips the test without a
#     writable cgroup2 file system.
#   ctr_two_cgroups NAME: ctr_cgroup_base NAME, then two cgroups made under
#     BASE, named as runtimes name theirs: CG_A machined's
#     machine.slice/machine-web\x2dPID.scope (its container WEB, web-PID:
#     a name no other test's or leftover cgroup has, as s.container ==
#     NAME matches every cgroup that name is read from), CG_B podman's
#     libpod-ID.scope; skips the test when they cannot be made.
#     ctr_two_cgroups_rm removes them (for the EXIT trap).
#   ctr_three FILE A B H: FILE, a script that starts three workloads and
#     waits for them: ctr_work A (its arguments) in RA's root and B in RB's,
#     each in its own pid and mount namespaces (unshare -f -p -m + chroot)
#     and moved into CG_A / CG_B by its shell before it execs on, and
#     ctr_work H on the host (H: its arguments, the directory first).
#   ctr_span_needs: skips the test without python3, curl or fay collector.
#   ctr_span_roots DIR...: a root (ctr_root) in each DIR with
#     span_producer in /bin and a /dev/shm (sources agent_tools/lib.sh).
#   ctr_collector: a real collector on free loopback ports (OTLP off),
#     its store in $T_TMP; PORT (agents), HTTP, URL.
#   ctr_podman_image DIR: a root in DIR (ctr_root) imported as a podman
#     image (podman import of its tarball: no registry is reachable), run
#     once to see podman runs it offline; its name in CTR_PODMAN_IMG.
#     Non-zero with the reason in CTR_PODMAN_WHY when podman is absent or
#     cannot run it.  ctr_podman_clean removes the image.
need_root
CW=$BUILD/tests/bin/ctr_work
[ -x "$FAY" ] || { fail "fay binary at $FAY"; done_testing; exit 1; }
[ -x "$CW" ] || skip_all "ctr_work is not built (make)"
command -v unshare >/dev/null && command -v chroot >/dev/null ||
	skip_all "unshare or chroot is not installed (util-linux, coreutils)"

ctr_root() {
	local r=$1 lib
	mkdir -p "$r"/{bin,tmp,run,proc,dev,etc,w,lib64,usr/lib/x86_64-linux-gnu}
	touch "$r/etc/os-release"	# systemd-nspawn wants it
	ln -sfn usr/lib "$r/lib"
	cp "$CW" "$r/bin/ctr_work"
	# (a name of the test's own: its queries tell its processes from
	# other tests' ctr_work)
	[ -z "${CTR_WORK_NAME:-}" ] || cp "$CW" "$r/bin/$CTR_WORK_NAME"
	# and libgcc_s, as every Debian root has it (fay's runtime needs it)
	for lib in $(ldd "$CW" | grep -o '/[^ ]*') $(ldd "$BUILD/libfay-probe.so" | grep -o '/[^ ]*libgcc_s[^ ]*'); do
		case "$lib" in
		*/ld-linux*) cp "$lib" "$r/lib64/$(basename "$lib")" ;;
		*) cp "$lib" "$r/usr/lib/x86_64-linux-gnu/$(basename "$lib")" ;;
		esac
	done
	chmod 1777 "$r/tmp"
}

ctr_start() {
	local r=$1 n=$2 rt=${CTR_RUNTIME:-unshare} up p
	rm -f "$r"/w/{ready,go,done,stop}
	case "$rt" in
	unshare)
		timeout 300 nice -n 10 unshare -p -m -f --mount-proc="$r/proc" \
			chroot "$r" /bin/ctr_work /w "$n" ${CTR_ARGS[@]+"${CTR_ARGS[@]}"} \
			>"$T_TMP/ctr.out" 2>&1 & up=$! ;;
	podman)
		# an image ctr_podman_image made; /w bind-mounted; no network
		timeout 300 nice -n 10 podman "${CTR_PODMAN_OPTS[@]}" run "${CTR_PODMAN_RUN[@]}" \
			-v "$r/w:/w" "$CTR_PODMAN_IMG" /bin/ctr_work /w "$n" \
			>"$T_TMP/ctr.out" 2>&1 & up=$! ;;
	nspawn)
		# no machined here (no systemd as pid 1): --register=no, and
		# --keep-unit (no scope asked of systemd over D-Bus)
		timeout 300 nice -n 10 systemd-nspawn -q -D "$r" --register=no --keep-unit \
			--as-pid2 /bin/ctr_work /w "$n" >"$T_TMP/ctr.out" 2>&1 & up=$! ;;
	esac
	T_PIDS+=($up)
	wait_for 30 test -s "$r/w/ready" || { CPID=; return 1; }
	# the process whose /w/ready is this root's (ctr_work, in the
	# container's pid namespace: not a child of ours)
	CPID=
	for p in $(pgrep -x ctr_work); do
		[ "/proc/$p/root/w/ready" -ef "$r/w/ready" ] && CPID=$p
	done
	[ -n "$CPID" ] || return 1
	CVPID=$(cat "$r/w/ready")
	T_PIDS+=($CPID)
}
ctr_none_left() {
	local p left=
	for p in $(pgrep -x ctr_work); do
		[ "/proc/$p/root" -ef "$1" ] && left=$p
		grep -qF "$2" "/proc/$p/cmdline" 2>/dev/null && left=$p
	done
	[ -z "$left" ] && pass "no workload left behind (stopped or running)" ||
		fail "no workload left behind (stopped or running)" "$(ps -o pid,stat,args -C ctr_work)"
}
# ctr_check MODE CMD N WHAT: fay query --json --probe-mode=MODE -c CMD
# "$Q" answers n = N (a test point; $R/w/done removed first, fay's
# stderr in $T_TMP/c.err)
ctr_check() {
	local a
	rm -f "$R/w/done"
	a=$(timeout 120 nice -n 10 "$FAY" query --json --probe-mode="$1" -c "$2" "$Q" \
		2>"$T_TMP/c.err")
	[ "$a" = "{\"n\":$3}" ] && pass "$4: n = $3" ||
		fail "$4: n = $3" "answer: $a" "$(cat "$T_TMP/c.err")"
}
ctr_go() { touch "$1/w/go"; }
ctr_done() { wait_for 60 test -s "$1/w/done"; }
ctr_stop() { touch "$1/w/stop"; }

# ctr_count DIR N MODE QUERY: a fresh workload in DIR calling N times, the
# query (with __PID__ replaced by its host pid, -p PID added when MODE
# says so) attached first; prints its --json answer (errors in
# $T_TMP/q.err; "HOSTPID VPID" in $T_TMP/cpid)
ctr_count() {
	local r=$1 n=$2 mode=$3 q=$4 pflag=() qp
	ctr_start "$r" "$n" || { echo "workload did not start: $(cat "$T_TMP/ctr.out")"; return; }
	echo "$CPID $CVPID" >"$T_TMP/cpid"	# for the caller (we run in $(...))
	q=${q//__PID__/$CPID}
	case "$mode" in -p:*) pflag=(-p "$CPID"); mode=${mode#-p:} ;; esac
	: >"$T_TMP/q.err"
	timeout 60 "$FAY" query --json --probe-mode="$mode" "${pflag[@]}" "$q" \
		>"$T_TMP/q.out" 2>"$T_TMP/q.err" & qp=$!
	attached_or_gone() { grep -q 'attached' "$T_TMP/q.err" || ! kill -0 $qp 2>/dev/null; }
	wait_for 60 attached_or_gone
	ctr_go "$r"
	ctr_done "$r"
	kill -INT $qp 2>/dev/null
	wait $qp
	ctr_stop "$r"
	wait_for 30 bash -c "! kill -0 $CPID"
	cat "$T_TMP/q.out"
}

# podman as root without systemd as pid 1: cgroupfs, events in a file;
# storage of its own under the test's directory (nothing left behind);
# runc where installed (crun refuses a hybrid cgroup v1/v2 host); limits
# no higher than podman's own (it lowers its RLIMIT_NPROC to 32768, and
# the runtime may not raise it again)
CTR_PODMAN_OPTS=(--cgroup-manager=cgroupfs --events-backend=file)
command -v runc >/dev/null && CTR_PODMAN_OPTS+=(--runtime runc)
CTR_PODMAN_RUN=(--rm --network=none --ulimit nofile=1024:1024 --ulimit nproc=4096:4096)
CTR_PODMAN_IMG=
ctr_podman_image() {
	local r=$1
	command -v podman >/dev/null || { CTR_PODMAN_WHY="podman is not installed (apt-get install podman)"; return 1; }
	CTR_PODMAN_OPTS+=(--root "$T_TMP/podman/root" --runroot "$T_TMP/podman/run")
	ctr_root "$r"
	tar -C "$r" -c . | podman "${CTR_PODMAN_OPTS[@]}" import - "localhost/fay-ctr-test:$$" \
		>"$T_TMP/podman.out" 2>&1 ||
		{ CTR_PODMAN_WHY="podman import failed: $(tail -3 "$T_TMP/podman.out")"; return 1; }
	CTR_PODMAN_IMG=localhost/fay-ctr-test:$$
	timeout 120 podman "${CTR_PODMAN_OPTS[@]}" run "${CTR_PODMAN_RUN[@]}" "$CTR_PODMAN_IMG" \
		/bin/ctr_work /nonexistent >"$T_TMP/podman.out" 2>&1
	# ctr_work's usage answer (2) says the container ran
	[ $? -eq 2 ] || { CTR_PODMAN_WHY="podman cannot run a container here: $(tail -3 "$T_TMP/podman.out")"; return 1; }
}
ctr_podman_clean() {
	[ -n "$CTR_PODMAN_IMG" ] || return 0
	podman "${CTR_PODMAN_OPTS[@]}" rmi -f "$CTR_PODMAN_IMG" >/dev/null 2>&1
	podman "${CTR_PODMAN_OPTS[@]}" system reset -f >/dev/null 2>&1
	CTR_PODMAN_IMG=
}

ctr_cgroup_base() {
	CGR=$(findmnt -n -t cgroup2 -o TARGET | head -1)
	[ -n "$CGR" ] && [ -w "$CGR" ] ||
		skip_all "no writable cgroup2 file system (containers are named from cgroups)"
	ID=$(printf 'fay%061d' $$ | tr -c '0-9a-f' "${2:-a}" | head -c 64)
	BASE=$CGR/$1-$$
}

ctr_two_cgroups() {
	ctr_cgroup_base "$1"
	WEB=web-$$
	CG_A=$BASE/machine.slice/"machine-web\\x2d$$.scope"
	CG_B=$BASE/libpod-$ID.scope
	mkdir -p "$CG_A" "$CG_B" || skip_all "cannot make cgroups under $CGR"
}
ctr_two_cgroups_rm() {
	for d in "$CG_A" "$CG_B" "$BASE/machine.slice" "$BASE"; do rmdir "$d" 2>/dev/null; done
}

ctr_three() {
	cat >"$1" <<EOF
sh -c 'echo \$\$ > "$CG_A/cgroup.procs"; exec unshare -f -p -m --mount-proc=$RA/proc chroot $RA /bin/ctr_work $2' &
sh -c 'echo \$\$ > "$CG_B/cgroup.procs"; exec unshare -f -p -m --mount-proc=$RB/proc chroot $RB /bin/ctr_work $3' &
$CW $4 &
wait
EOF
}

ctr_span_needs() {
	command -v python3 >/dev/null || skip_all "python3 is not installed"
	command -v curl >/dev/null || skip_all "curl is not installed"
	"$FAY" collector --help >/dev/null 2>&1 || skip_all "fay collector not built"
}

ctr_span_roots() {
	local r
	for r in "$@"; do
		ctr_root "$r"
		cp "$TOOLS/span_producer" "$r/bin/span_producer"
		mkdir -p "$r/dev/shm"
		chmod 1777 "$r/dev/shm" "$r/w"
	done
}

ctr_collector() {
	PORT=$(free_port)
	HTTP=$(free_port)
	URL=http://127.0.0.1:$HTTP
	"$FAY" collector --listen "127.0.0.1:$PORT" --http "127.0.0.1:$HTTP" --db "$T_TMP/fay.db" \
		--otlp-http off --otlp-grpc off 2>>"$T_TMP/coll.log" &
	T_PIDS+=($!)
	wait_for 30 curl -sf "$URL/health"
}
