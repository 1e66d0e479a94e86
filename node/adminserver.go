package node

import (
	"runtime"

	"google.golang.org/grpc"
)

// adminWindow is the admin server's flow-control window, per stream and
// per connection. Setting it turns off gRPC's dynamic window (BDP
// estimation), which sends a PING, and reads its ack, for every request
// that carries data: two syscalls and two wakeups more per admin call. At
// 1 MB a key import batch or a snapshot restore still streams at about
// 1 GB/s at 1 ms of round trip.
const adminWindow = 1 << 20

// adminServerOptions are the admin gRPC server's transport options:
//   - its streams are served from a fixed pool of goroutines (one per
//     usable core) instead of a new goroutine per stream, whose stack grows
//     anew each time (runtime.newstack on every key create);
//   - a fixed flow-control window (adminWindow): no BDP pings.
func adminServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.InitialWindowSize(adminWindow), grpc.InitialConnWindowSize(adminWindow),
	}
}
