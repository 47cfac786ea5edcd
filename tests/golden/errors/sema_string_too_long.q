from s in syscall("read") where s.comm == "a_command_name_longer_than_16" select s.pid
