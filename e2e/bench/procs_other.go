//go:build !linux

package main

import "os/exec"

// killWithParent: only Linux kills a child with its parent; elsewhere the
// harness's own cleanup stops its children.
func killWithParent(*exec.Cmd) {}
