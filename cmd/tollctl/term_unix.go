//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"bufio"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// readHidden shows prompt and reads one line from f with terminal echo
// turned off. isTerm is false, and nothing is read, when f is not a terminal.
func readHidden(f *os.File, prompt func()) (line string, isTerm bool, err error) {
	fd := int(f.Fd())
	saved, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return "", false, nil
	}
	quiet := *saved
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	quiet.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &quiet); err != nil {
		return "", true, err
	}
	prompt()
	restore := func() { _ = unix.IoctlSetTermios(fd, ioctlSetTermios, saved) }
	defer restore()

	// Ctrl-C at the prompt must not leave the terminal without echo.
	sigs := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	defer close(done)
	go func() {
		select {
		case <-sigs:
			restore()
			os.Exit(130)
		case <-done:
		}
	}()

	line, err = bufio.NewReader(f).ReadString('\n')
	if err == io.EOF {
		err = nil // Ctrl-D: input ended without a newline
	}
	return line, true, err
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	return err == nil
}
