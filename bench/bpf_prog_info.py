#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the kernel says of a loaded BPF program, for the benches (root).

  bpf_prog_info.py ID      print "run_time_ns RUN_TIME run_cnt RUN_CNT
                           verified_insns N" of program ID (bpf_prog_info;
                           the run figures count while statistics are on)
  bpf_prog_info.py stats   turn the kernel's BPF run-time statistics on
                           (BPF_ENABLE_STATS: held by this process's fd,
                           off again when it exits), print "on", wait
                           for SIGTERM or SIGINT

The offsets are of the uapi struct bpf_prog_info (Linux 5.16+:
verified_insns), which only ever grows at its end.
"""
import ctypes
import os
import signal
import struct
import sys

SYS_BPF = 321                   # x86-64
BPF_PROG_GET_FD_BY_ID = 13
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0
INFO_SIZE = 232                 # sizeof(struct bpf_prog_info), Linux 6.1 uapi
RUN_TIME_NS, RUN_CNT, VERIFIED_INSNS = 192, 200, 216

libc = ctypes.CDLL(None, use_errno=True)


def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    r = libc.syscall(SYS_BPF, cmd, buf, 128)
    if r < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return r


def prog_info(prog_id):
    fd = bpf(BPF_PROG_GET_FD_BY_ID, struct.pack("III", prog_id, 0, 0))
    try:
        info = ctypes.create_string_buffer(INFO_SIZE)
        bpf(BPF_OBJ_GET_INFO_BY_FD, struct.pack("IIQ", fd, INFO_SIZE, ctypes.addressof(info)))
        raw = info.raw
        return (struct.unpack_from("Q", raw, RUN_TIME_NS)[0], struct.unpack_from("Q", raw, RUN_CNT)[0],
                struct.unpack_from("I", raw, VERIFIED_INSNS)[0])
    finally:
        os.close(fd)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if sys.argv[1] == "stats":
        bpf(BPF_ENABLE_STATS, struct.pack("I", BPF_STATS_RUN_TIME))
        print("on", flush=True)
        signal.sigwait([signal.SIGTERM, signal.SIGINT])
        return
    t, n, v = prog_info(int(sys.argv[1]))
    print("run_time_ns %d run_cnt %d verified_insns %d" % (t, n, v))


if __name__ == "__main__":
    main()
