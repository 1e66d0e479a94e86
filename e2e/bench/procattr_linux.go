package main

import "syscall"

// childAttr makes the kernel kill a child when the harness dies, so that no
// node or mock outlives an interrupted run.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
