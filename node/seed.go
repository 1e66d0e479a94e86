package node

import (
	"context"
	"errors"
	"fmt"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// openAISeedModels are the routes a first start creates when OPENAI_API_KEY
// is set.
var openAISeedModels = []string{"gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini", "o4-mini", "text-embedding-3-small"}

// firstStartSetup registers the admin token in the replicated state and,
// on a fresh cluster, seeds the starter routes.
func (n *Node) firstStartSetup(ctx context.Context) error {
	if err := n.registerAdminToken(ctx); err != nil {
		return err
	}
	if err := n.ensureClusterSecret(ctx); err != nil {
		return fmt.Errorf("set cluster secret: %w", err)
	}
	st := n.store.State()
	if !n.store.Fresh() || !n.cfg.Seed || len(st.RouteNames()) > 0 {
		return nil
	}
	var cmds []*pb.Command
	if n.cfg.OpenAIKey != "" {
		v, err := st.SealCredential("openai", n.cfg.OpenAIKey)
		if err != nil {
			return fmt.Errorf("seal the OpenAI credential: %w", err)
		}
		cmds = append(cmds, &pb.Command{Op: &pb.Command_SetCredential{
			SetCredential: &pb.SetCredentialCommand{Name: "openai", Value: v}}})
		for _, m := range openAISeedModels {
			cmds = append(cmds, addDeploymentCmd(m, &pb.Deployment{Id: "openai", Provider: routing.ProviderOpenAI,
				BaseUrl: routing.OpenAIBaseURL, UpstreamModel: m, Credential: "openai"}))
		}
	}
	cmds = append(cmds, addDeploymentCmd("demo", &pb.Deployment{Id: "demo", Provider: routing.ProviderDemo, UpstreamModel: "demo"}))
	for _, c := range cmds {
		if err := n.apply(ctx, c); err != nil {
			return fmt.Errorf("seed routes: %w", err)
		}
	}
	n.log.Info("seeded starter routes", "openai", n.cfg.OpenAIKey != "", "demo", true)
	return nil
}

func addDeploymentCmd(route string, d *pb.Deployment) *pb.Command {
	return &pb.Command{Op: &pb.Command_AddDeployment{AddDeployment: &pb.AddDeploymentCommand{Route: route, Deployment: d}}}
}

func (n *Node) apply(ctx context.Context, c *pb.Command) error {
	_, err := n.store.Apply(ctx, c)
	return err
}

// ensureClusterSecret sets the secret nodes authenticate each other with,
// once per cluster (leader only).
func (n *Node) ensureClusterSecret(ctx context.Context) error {
	st := n.store.State()
	if st.StoredClusterSecret() != "" {
		return nil
	}
	secret, err := st.SealClusterSecret(randomToken(32))
	if err != nil {
		return err
	}
	return n.apply(ctx, &pb.Command{Op: &pb.Command_SetClusterSecret{
		SetClusterSecret: &pb.SetClusterSecretCommand{Secret: secret}}})
}

// sealCredentials, on the leader of a node with a secrets key, seals the
// cluster secret and the credentials stored before the key was set, or
// sealed with a key being rotated out, one command each. A reseal
// applies only if the credential did not change since it was read (see
// SetCredentialCommand.reseal_of). Older Raft log entries and snapshots
// keep the clear values until Raft compacts them.
func (n *Node) sealCredentials(ctx context.Context) error {
	if !n.ready.Load() {
		return nil
	}
	st := n.store.State()
	if !st.Sealing() {
		return nil
	}
	if cs := st.StoredClusterSecret(); st.ClusterSecretNeedsSeal() {
		v, err := st.SealClusterSecret(st.ClusterSecret())
		if err != nil {
			return err
		}
		if err := n.apply(ctx, &pb.Command{Op: &pb.Command_SetClusterSecret{
			SetClusterSecret: &pb.SetClusterSecretCommand{Secret: v, ResealOf: cs}}}); err != nil {
			return fmt.Errorf("seal the cluster secret: %w", err)
		}
	}
	for _, c := range st.Credentials() {
		if !st.NeedsSeal(c.GetName(), c.GetValue()) {
			continue
		}
		clear, err := st.OpenCredential(c)
		if err != nil {
			return err
		}
		v, err := st.SealCredential(c.GetName(), clear)
		if err != nil {
			return err
		}
		err = n.apply(ctx, &pb.Command{Op: &pb.Command_SetCredential{
			SetCredential: &pb.SetCredentialCommand{Name: c.GetName(), Value: v, ResealOf: c.GetValue()}}})
		if errors.Is(err, raftstore.ErrFailedPrecondition) {
			continue // changed meanwhile; the next round looks again
		}
		if err != nil {
			return fmt.Errorf("seal credential %q: %w", c.GetName(), err)
		}
		n.log.Info("sealed a credential with the current secrets key", "credential", c.GetName())
	}
	return nil
}

// registerAdminToken adds this node's admin token to the replicated state
// if it is not there yet (through the leader, from any node), so that the
// token this node printed works on every node.
func (n *Node) registerAdminToken(ctx context.Context) error {
	if n.adminToken == "" {
		return nil
	}
	h := raftstore.HashSecret(n.adminToken)
	if n.store.State().HasAdminToken(h) {
		return nil
	}
	if _, err := n.propose(ctx, &pb.Command{Op: &pb.Command_AddAdminToken{
		AddAdminToken: &pb.AddAdminTokenCommand{TokenHash: h[:]}}}); err != nil {
		return fmt.Errorf("register admin token: %w", err)
	}
	return nil
}
