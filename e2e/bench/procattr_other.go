//go:build !linux

package main

import "syscall"

// childAttr: only Linux can tie a child's life to the harness's; elsewhere
// the harness's own cleanup stops its children.
func childAttr() *syscall.SysProcAttr { return nil }
