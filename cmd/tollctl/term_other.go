//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import "os"

// readHidden cannot switch off echo on this platform, so it reports that f
// is not a terminal and the caller reads stdin as a stream.
func readHidden(*os.File, func()) (string, bool, error) {
	return "", false, nil
}

// isTerminal cannot tell on this platform and reports false, so commands
// that would prompt ask for an explicit flag instead.
func isTerminal(*os.File) bool { return false }
