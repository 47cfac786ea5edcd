from s in syscall("write")
let fd = s.arg(0)
let big = s.arg(2) >= 0x1000 || !(fd > 2)
where big && (fd & 1) == 1 && -fd < 0 && ~fd != 0 && fd << 2 >> 1 != 3 && fd % 3 != 2 && fd ^ 5 != 0
select { fd: fd, x: (fd + 1) * 2 - 3, y: fd | 8, z: 10us + 1ms + 2s + 1h / 60 }
