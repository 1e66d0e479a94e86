//go:build !linux

package node

// dropCodePages does nothing here: the executable's pages are left to the
// kernel.
func dropCodePages() (int, error) { return 0, nil }
