# SPDX-License-Identifier: MIT
# Shared by tests/vm/*.sh (after tests/lib/lib.sh): run a command in the
# QEMU guest and relay its TAP lines as ours.
command -v qemu-system-x86_64 >/dev/null ||
	skip_all "qemu-system-x86_64 is not installed (scripts/install-deps)"
VM=$TOP/tests/vm/vmtest/run-in-vm.sh

# vm_tap OUT TIMEOUT [VAR=value ...] CMD...: run CMD in the guest from
# $T_TMP (shared read-write), its output in OUT; renumber its "ok"/"not ok"
# lines into ours.  Sets VM_RC to the guest command's status; returns 1
# (after reporting a failure) when the guest never ran it.
vm_tap() {
	local out=$1 t=$2 vars=()
	shift 2
	# The runner passes its own environment to the guest, and runs only
	# the command: give it the assignments, not the command line.
	while [[ $# -gt 0 && $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
		vars+=("$1")
		shift
	done
	cd "$T_TMP" || return 1
	env "${vars[@]}" VMTEST_SHARES="$T_TMP" timeout "$t" "$VM" "$@" >"$out" 2>&1
	VM_RC=$?
	if [ $VM_RC -eq 125 ] || [ $VM_RC -eq 124 ]; then
		fail "the guest did not run the test (rc=$VM_RC)" "$(tail -5 "$out")"
		return 1
	fi
	while IFS= read -r line; do
		case "$line" in
		"ok "*) pass "guest: ${line#ok * - }" ;;
		"not ok "*) fail "guest: ${line#not ok * - }" ;;
		"#"*) echo "$line" ;;
		esac
	done <"$out"
}

# vm_need_query_work: root, fay and query_work (W) built, or skip saying
# which is missing
vm_need_query_work() {
	need_root
	W=$BUILD/tests/bin/query_work
	[ -x "$FAY" ] || skip_all "fay is not built"
	[ -x "$W" ] || skip_all "query_work is not built (make)"
}

# vm_guest SCRIPT N [VAR=value ...]: run tests/vm/SCRIPT with bash in the
# guest (vm_tap, 900 s), then check it ran its N cases and exited 0, and
# end the test.
vm_guest() {
	local script=$1 want=$2 out=$T_TMP/guest.log
	shift 2
	if vm_tap "$out" 900 "$@" bash "$TOP/tests/vm/$script"; then
		ok "the guest ran every case ($want)" [ "$(grep -c '^ok \|^not ok ' "$out")" -eq "$want" ]
		ok "guest script exited 0" [ "$VM_RC" -eq 0 ]
	fi
	done_testing
}
