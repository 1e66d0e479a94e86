//go:build !unix

package main

// restrictUmask: there is no umask outside Unix; files keep the
// permissions the node asks for (on Windows, the data dir's ACL).
func restrictUmask() {}
