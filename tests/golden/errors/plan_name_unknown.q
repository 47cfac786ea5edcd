from s in syscall("*") where s.name == "no_such_call" select { n: count() }
