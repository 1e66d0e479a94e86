//go:build !unix

package node

import "time"

// processCPU is not read here: releases are spaced by their wall time.
func processCPU() time.Duration { return -1 }
