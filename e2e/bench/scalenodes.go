package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// scaleSet is the nodes of a scale run: one node, or a cluster formed
// with --bootstrap-expect whose members are named n1, n2, ...
type scaleSet struct {
	bin   *Binaries
	tmp   string
	env   []string
	nodes []*Gateway
	names []string
	conns []*grpc.ClientConn
	prof  *profiler // one node only; nil otherwise
}

// startScaleNodes starts cfg.Nodes fresh nodes (at least one) and waits
// until every one is ready.
func startScaleNodes(bin *Binaries, tmp string, cfg ScaleConfig) (*scaleSet, error) {
	sc := &scaleSet{bin: bin, tmp: tmp, env: cfg.NodeEnv}
	n := max(1, cfg.Nodes)
	for i := range n {
		name := ""
		if n > 1 {
			name = fmt.Sprintf("n%d", i+1)
		}
		g, err := sc.newNode(name)
		if err != nil {
			return nil, err
		}
		sc.nodes, sc.names = append(sc.nodes, g), append(sc.names, cmpName(name))
	}
	if n == 1 && cfg.ProfileDir != "" {
		var err error
		if sc.prof, err = newProfiler(cfg.ProfileDir); err != nil {
			return nil, err
		}
		sc.nodes[0].Extra = append(sc.nodes[0].Extra, "--pprof-addr", sc.prof.addr)
	}
	if n > 1 {
		var gossip []string
		for _, g := range sc.nodes {
			gossip = append(gossip, g.Gossip)
		}
		for _, g := range sc.nodes {
			g.Extra = append(g.Extra, "--bootstrap-expect", fmt.Sprint(n), "--join", strings.Join(gossip, ","))
		}
	}
	for _, g := range sc.nodes {
		if err := g.launch(); err != nil {
			sc.stop()
			return nil, err
		}
	}
	for _, g := range sc.nodes {
		if _, err := g.waitReady(); err != nil {
			sc.stop()
			return nil, err
		}
		if err := sc.dial(g); err != nil {
			sc.stop()
			return nil, err
		}
	}
	return sc, nil
}

func cmpName(name string) string {
	if name == "" {
		return "node"
	}
	return name
}

// newNode prepares (does not start) a node; a named one is a cluster
// member with that node id.
func (sc *scaleSet) newNode(name string) (*Gateway, error) {
	g, err := newNamedGateway(sc.bin, sc.tmp, "", name)
	if err != nil {
		return nil, err
	}
	g.Env = sc.env
	g.ReadyTimeout = 5 * time.Minute // a million keys on a busy machine
	if name != "" {
		g.Extra = []string{"--node-id", name, "--dead-node-grace", "10m", "--drain-delay", "0s"}
	}
	return g, nil
}

func (sc *scaleSet) dial(g *Gateway) error {
	conn, err := grpc.NewClient(g.Admin, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(benchToken(g.Token)))
	if err != nil {
		return err
	}
	sc.conns = append(sc.conns, conn)
	return nil
}

// stop ends every node and closes the connections.
func (sc *scaleSet) stop() {
	for _, c := range sc.conns {
		_ = c.Close()
	}
	for _, g := range sc.nodes {
		if g.proc != nil && !g.proc.exited() {
			_ = g.Stop()
		}
	}
}

func (sc *scaleSet) index(g *Gateway) int {
	for i, n := range sc.nodes {
		if n == g {
			return i
		}
	}
	return -1
}

// leader is the node that leads (asked of the first node, for up to a
// minute while an election runs).
func (sc *scaleSet) leader() (*Gateway, error) {
	if len(sc.nodes) == 1 {
		return sc.nodes[0], nil
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := pb.NewClusterServiceClient(sc.conns[0]).Status(ctx, &pb.StatusRequest{})
		cancel()
		if err == nil {
			for i, name := range sc.names {
				if name == st.GetLeader() {
					return sc.nodes[i], nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("no leader among %s within a minute", strings.Join(sc.names, ", "))
}

// cpuTicks is every node's user+system CPU so far, in 10 ms ticks.
func (sc *scaleSet) cpuTicks() ([]uint64, error) {
	out := make([]uint64, len(sc.nodes))
	for i, g := range sc.nodes {
		t, err := cpuTicks(g.Pid())
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// settle waits (at most a minute) until every node is quiet: under 5% of
// a core over a second, so that the GC and the memory release after an
// import are not counted as the creates' CPU. It then returns each node's
// idle CPU, in cores, over 5 s more.
func (sc *scaleSet) settle() []float64 {
	busy := func(d time.Duration) []float64 {
		t0, err := sc.cpuTicks()
		if err != nil {
			return nil
		}
		time.Sleep(d)
		t1, err := sc.cpuTicks()
		if err != nil {
			return nil
		}
		out := make([]float64, len(t0))
		for i := range t0 {
			out[i] = float64(t1[i]-t0[i]) / 100 / d.Seconds() // 100 ticks a second
		}
		return out
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if slices.ContainsFunc(busy(time.Second), func(c float64) bool { return c >= 0.05 }) {
			continue
		}
		break
	}
	return busy(5 * time.Second)
}
