package main

import (
	"fmt"
	"strings"
)

// ChatCPU says where the machine's CPU went in the chat runs, so a fall in
// chat throughput while keys are created can be set against what the
// creates themselves cost. The node's and the bench's CPU per chat answer
// are taken from the runs alone; in a run with writes, what the node (or
// the bench: load generator plus the admin client making the creates)
// used beyond its answers at that rate is charged to the creates.
type ChatCPU struct {
	Cores             int     `json:"cores"`
	AloneCores        float64 `json:"alone_cores"`  // node + mock + bench, median of the runs alone
	WritesCores       float64 `json:"writes_cores"` // the same with writes
	NodeMsPerCreate   float64 `json:"node_ms_per_create"`
	ClientMsPerCreate float64 `json:"client_ms_per_create"`
	CreatesShare      float64 `json:"creates_share"` // of the machine's cores, node + client
}

// chatCPU computes the split from the runs (nil when no run has CPU
// figures, as in runs recorded before they were kept).
func chatCPU(runs []*ChatRun, cores int) *ChatCPU {
	var nodeAns, benchAns, alone, writes []float64
	for _, r := range runs {
		u, x := r.Result.Usage, r.Result.Throughput
		if u.GatewayCPU <= 0 || x <= 0 {
			continue
		}
		total := u.GatewayCPU + u.MockCPU + u.LoadCPU
		if r.Writes {
			writes = append(writes, total)
			continue
		}
		alone = append(alone, total)
		nodeAns = append(nodeAns, u.GatewayCPU/x)
		benchAns = append(benchAns, u.LoadCPU/x)
	}
	if len(alone) == 0 || len(writes) == 0 || cores <= 0 {
		return nil
	}
	nodeA, benchA := median(nodeAns), median(benchAns)
	var node, client, share []float64
	for _, r := range runs {
		u, x := r.Result.Usage, r.Result.Throughput
		if !r.Writes || u.GatewayCPU <= 0 || r.CreatesPerSec <= 0 {
			continue
		}
		n := max(0, u.GatewayCPU-x*nodeA)
		c := max(0, u.LoadCPU-x*benchA)
		node = append(node, n/r.CreatesPerSec*1e3)
		client = append(client, c/r.CreatesPerSec*1e3)
		share = append(share, (n+c)/float64(cores))
	}
	return &ChatCPU{Cores: cores, AloneCores: median(alone), WritesCores: median(writes),
		NodeMsPerCreate: median(node), ClientMsPerCreate: median(client), CreatesShare: median(share)}
}

// write adds the CPU split to the chat section of the report.
func (c *ChatCPU) write(b *strings.Builder, throughputRatio float64) {
	fmt.Fprintf(b, "\nCPU (from /proc over each run's measurement): alone the node, the mock and the bench used %.2f of the machine's %d cores, with writes %.2f. ",
		c.AloneCores, c.Cores, c.WritesCores)
	fmt.Fprintf(b, "Beyond what their answers cost alone, each create took %.2f ms of the node's CPU and %.2f ms of the bench's (its admin client): "+
		"%.0f%% of the machine, against %.0f%% of the chat's throughput lost.\n", c.NodeMsPerCreate, c.ClientMsPerCreate,
		c.CreatesShare*100, (1-throughputRatio)*100)
}
