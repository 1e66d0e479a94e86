//go:build !linux

package main

// relaxSysmon does nothing outside Linux (see sysmon_linux.go).
func relaxSysmon() error { return nil }
