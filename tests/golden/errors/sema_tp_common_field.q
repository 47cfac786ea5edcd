from t in tracepoint("syscalls:sys_enter_openat") where t.common_pid > 0 select count()
