package capfile

// dumpsCore reports whether signal sig (Linux numbering) terminates a
// process with a core dump (signal(7): action "Core"). A core written
// while the process lived (gdb's gcore) carries some other signal, or
// none, in its NT_SIGINFO: that one did not end it.
func dumpsCore(sig int) bool {
	switch sig {
	case 3, 4, 5, 6, 7, 8, 11, 24, 25, 31: // QUIT ILL TRAP ABRT BUS FPE SEGV XCPU XFSZ SYS
		return true
	}
	return false
}
