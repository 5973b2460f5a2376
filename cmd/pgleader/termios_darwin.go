package main

import "golang.org/x/sys/unix"

// getTermios is the ioctl isTerminal asks a descriptor's terminal settings with.
const getTermios = unix.TIOCGETA
