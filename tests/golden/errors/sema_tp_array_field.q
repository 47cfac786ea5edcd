from r in tracepoint("raw_syscalls:sys_enter") select r.args
