package proxy

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// DeploymentHealth reports this node's live view of the deployments of
// route (of every route when route is empty): cooldowns, consecutive
// failures, latency and requests in flight (zero for one never called). None of it is
// replicated; the admin API shows it for the node that answers.
func (h *Handler) DeploymentHealth(route string) []*pb.DeploymentHealth {
	st := h.cfg.State.State()
	if st == nil {
		return nil
	}
	names := st.RouteNames()
	if route != "" {
		names = []string{route}
	}
	now := time.Now()
	var out []*pb.DeploymentHealth
	for _, name := range names {
		r := st.Route(name)
		if r == nil {
			continue
		}
		for _, d := range r.Deployments {
			rep := h.health.Peek(d).Report(now) // nil: never called here

			dh := &pb.DeploymentHealth{Route: name, Deployment: d.ID, Cooling: rep.Cooling,
				ConsecutiveFailures: rep.Failures, LatencyMs: rep.Latency.Milliseconds(), InFlight: rep.InFlight}
			if rep.Cooling {
				dh.CooldownUntil = timestamppb.New(rep.CoolUntil)
			}
			out = append(out, dh)
		}
	}
	return out
}
