package node

import (
	"net/http"

	"github.com/tollgate/tollgate/node/admin"
	mcpgw "github.com/tollgate/tollgate/node/mcp"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// The MCP admin writes change the replicated state: a follower forwards
// them to the leader.
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
	})
	for _, p := range []string{mcpgw.PathMCP, mcpgw.PathMCP + "/", mcpgw.PathMetadata, mcpgw.PathMetadata + "/"} {
		mux.Handle(p, n.mcp)
	}
	adm.RegisterMcp(n.grpcSrv, n.mcp)
}
