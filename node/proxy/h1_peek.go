//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// fastClient: upstreams go through the gateway's HTTP/1.1 client (see
// Transport).
const fastClient = true

// peekFD peeks at one byte of an idle connection's socket without
// blocking (see h1Conn.alive).
func (c *h1Conn) peekFD(fd uintptr) bool {
	c.peekN, _, c.peekErr = syscall.Recvfrom(int(fd), c.peekBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true
}

// wouldBlock reports whether a peek found nothing to read: the connection
// is open and silent.
func wouldBlock(err error) bool { return errors.Is(err, syscall.EAGAIN) }

// awaitPlainFD tries to read an answer's first bytes, without blocking,
// into a read buffer taken for the try; when the socket is empty it gives
// the buffer back and returns false, and raw.Read parks until the socket
// is readable and calls it again (see h1Conn.awaitAnswer).
func (c *h1Conn) awaitPlainFD(fd uintptr) bool {
	c.attachReader()
	c.rawFD = int(fd)
	_, err := c.br.Peek(1)
	c.rawFD = -1
	if wouldBlock(err) {
		c.detachReader()
		return false
	}
	if err != nil && err != io.EOF {
		c.awaitErr = c.readError(err)
	}
	return true
}

// awaitTLSFD waits, with a non-blocking peek, for the TLS connection's
// socket to hold bytes (the TLS layer reads them).
func (c *h1Conn) awaitTLSFD(fd uintptr) bool {
	_, _, err := syscall.Recvfrom(int(fd), c.peekBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	if wouldBlock(err) {
		return false
	}
	if err != nil {
		c.awaitErr = c.readError(os.NewSyscallError("recvfrom", err))
	}
	return true
}

// readFD reads the socket of an awaitAnswer, without blocking: EAGAIN
// when it is empty, io.EOF when the server closed.
func (c *h1Conn) readFD(p []byte) (int, error) {
	for {
		n, err := syscall.Read(c.rawFD, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, err
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}
