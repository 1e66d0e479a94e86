package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/node/admin"
	mcpgw "github.com/tollgate/tollgate/node/mcp"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// The MCP admin writes change the replicated state: a follower forwards
// them to the leader.
// MCPConfig bounds this node's MCP client sessions (mcp.Config).
type MCPConfig struct {
	MaxSessionsPerKey  int           // default 64
	SessionIdleTimeout time.Duration // default 30m
}

func init() {
	for _, m := range []string{pb.McpService_AddMcpServer_FullMethodName, pb.McpService_RemoveMcpServer_FullMethodName,
		pb.McpService_SetMcpTools_FullMethodName} {
		writeMethods[m] = true
	}
}

// mountMCP builds the node's MCP gateway: /mcp and /mcp/NAME and the
// protected-resource metadata on the data plane's mux, and McpService on
// the admin API. Run starts it (runMCP), Close stops it.
func (n *Node) mountMCP(mux *http.ServeMux, adm *admin.Server) {
	n.mcp = mcpgw.New(mcpgw.Config{
		State: n.store, Ready: n.ready.Load, Limiter: n.limiter, Budgets: n.budgets,
		Record: func(rec *pb.SpendRecord, uses []*pb.BudgetUse) {
			if err := n.ledger.Append(rec, uses); err != nil {
				n.log.Error("ledger append failed", "request", rec.GetRequestId(), "err", err)
			}
		},
		NodeID: n.cfg.NodeID, Version: n.cfg.Version, Logger: n.log,
		MaxSessionsPerKey: n.cfg.MCP.MaxSessionsPerKey, SessionTimeout: n.cfg.MCP.SessionIdleTimeout,
	})
	for _, p := range []string{mcpgw.PathMCP, mcpgw.PathMCP + "/", mcpgw.PathMetadata, mcpgw.PathMetadata + "/"} {
		mux.Handle(p, n.mcp)
	}
	adm.RegisterMcp(n.grpcSrv, n.mcp)
}

// mcpResealInterval is how often the leader looks for MCP header and
// environment values to seal with the current secrets key.
const mcpResealInterval = 2 * time.Second

// runMCP runs the gateway until ctx is done; on the leader it also seals
// MCP secrets stored in the clear or with a key being rotated out.
func (n *Node) runMCP(ctx context.Context) {
	go n.mcp.Run(ctx)
	t := time.NewTicker(mcpResealInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n.ready.Load() && n.store.IsLeader() {
			if err := n.sealMcpServers(ctx); err != nil {
				n.log.Warn("seal mcp server secrets", "err", err)
			}
		}
	}
}

// sealMcpServers reseals, one command each, the MCP servers whose values
// need it (see raftstore State.ResealMcpServer and
// PutMcpServerCommand.reseal_of).
func (n *Node) sealMcpServers(ctx context.Context) error {
	st := n.store.State()
	if !st.Sealing() {
		return nil
	}
	for _, m := range st.McpServers() {
		next, changed, err := st.ResealMcpServer(m)
		if err != nil || !changed {
			continue // a value that does not open here stays as it is
		}
		err = n.apply(ctx, &pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{Server: next, ResealOf: m}}})
		if errors.Is(err, raftstore.ErrFailedPrecondition) {
			continue // changed meanwhile; the next round looks again
		}
		if err != nil {
			return fmt.Errorf("mcp server %q: %w", m.GetName(), err)
		}
		n.log.Info("sealed an mcp server's secrets with the current secrets key", "server", m.GetName())
	}
	return nil
}
