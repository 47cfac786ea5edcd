# SPDX-License-Identifier: MIT
# Sourced by the container benchmarks (bench/exec_watch.sh,
# bench/exec_first_calls.sh): ctr_bench_root DIR CTR_WORK makes in DIR a
# root holding ctr_work in /bin and its own COPIES of its libraries (its
# libc another file, another inode, than the host's), the loader in
# /lib64, /lib -> usr/lib, and /w for the workload's files.
ctr_bench_root() {
	local r=$1 cw=$2 lib
	mkdir -p "$r"/{bin,w,lib64,usr/lib/x86_64-linux-gnu}
	ln -sfn usr/lib "$r/lib"
	cp "$cw" "$r/bin/ctr_work"
	for lib in $(ldd "$cw" | grep -o '/[^ ]*'); do
		case "$lib" in
		*/ld-linux*) cp "$lib" "$r/lib64/" ;;
		*) cp "$lib" "$r/usr/lib/x86_64-linux-gnu/" ;;
		esac
	done
}
