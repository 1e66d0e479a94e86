package node

import (
	"runtime"

	"google.golang.org/grpc"
)

// adminStreamWorkers serves the admin API's streams from a fixed pool of
// goroutines (one per usable core) instead of a new goroutine per stream,
// whose stack grows anew each time (runtime.newstack on every key create).
func adminStreamWorkers() grpc.ServerOption {
	return grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0)))
}
