package main

import (
	"os/exec"
	"syscall"
)

// killWithParent has the child killed when the harness dies.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
