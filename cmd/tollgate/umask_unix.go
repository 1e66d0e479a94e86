//go:build unix

package main

import "syscall"

// restrictUmask makes what the process creates its own user's only.
func restrictUmask() { syscall.Umask(0o077) }
