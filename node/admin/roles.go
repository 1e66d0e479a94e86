package admin

import (
	"slices"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// Permission names what an admin RPC needs; a role grants a set of them.
type Permission string

// The permissions. Reads never return a secret; what differs between
// them is which resources they show.
const (
	PermKeysRead         Permission = "keys.read"
	PermKeysWrite        Permission = "keys.write"
	PermTeamsRead        Permission = "teams.read"
	PermTeamsWrite       Permission = "teams.write"
	PermModelsRead       Permission = "models.read"
	PermModelsWrite      Permission = "models.write"
	PermModelsTest       Permission = "models.test" // sends a real upstream request
	PermCredentialsRead  Permission = "credentials.read"
	PermCredentialsWrite Permission = "credentials.write"
	PermSpendRead        Permission = "spend.read"
	PermClusterRead      Permission = "cluster.read"
	PermClusterWrite     Permission = "cluster.write"  // remove a node, restore a backup
	PermClusterBackup    Permission = "cluster.backup" // the whole state, token hashes and sealed credentials included
	PermClusterInternal  Permission = "cluster.internal"
	PermUsersRead        Permission = "users.read"
	PermUsersWrite       Permission = "users.write"
	PermAuditRead        Permission = "audit.read"
	PermMcpRead          Permission = "mcp.read"
	PermMcpWrite         Permission = "mcp.write" // servers, their sealed headers, tool allow-lists
	PermMcpTest          Permission = "mcp.test"  // connects to the server and lists its tools
	// permAuthenticated is every caller's: calls about the caller itself.
	permAuthenticated Permission = ""
)

// rule is what an admin RPC needs, and whether it is a write (which the
// state machine records in the audit log).
type rule struct {
	perm  Permission
	write bool
}

func read(p Permission) rule  { return rule{perm: p} }
func write(p Permission) rule { return rule{perm: p, write: true} }

// rules holds a rule for every admin RPC. A call without one is refused,
// and a test checks the table against the service descriptors, so a new
// RPC cannot ship without one.
var rules = map[string]rule{
	pb.KeyService_CreateKey_FullMethodName:  write(PermKeysWrite),
	pb.KeyService_ListKeys_FullMethodName:   read(PermKeysRead),
	pb.KeyService_GetKey_FullMethodName:     read(PermKeysRead),
	pb.KeyService_UpdateKey_FullMethodName:  write(PermKeysWrite),
	pb.KeyService_RevokeKey_FullMethodName:  write(PermKeysWrite),
	pb.KeyService_RotateKey_FullMethodName:  write(PermKeysWrite),
	pb.KeyService_ImportKeys_FullMethodName: write(PermKeysWrite),

	pb.ModelService_AddDeployment_FullMethodName:    write(PermModelsWrite),
	pb.ModelService_UpdateDeployment_FullMethodName: write(PermModelsWrite),
	pb.ModelService_RemoveDeployment_FullMethodName: write(PermModelsWrite),
	pb.ModelService_DeleteModel_FullMethodName:      write(PermModelsWrite),
	pb.ModelService_SetRouteOptions_FullMethodName:  write(PermModelsWrite),
	pb.ModelService_ListModels_FullMethodName:       read(PermModelsRead),
	pb.ModelService_GetModel_FullMethodName:         read(PermModelsRead),
	pb.ModelService_ListPrices_FullMethodName:       read(PermModelsRead),
	pb.ModelService_TestModel_FullMethodName:        read(PermModelsTest),

	pb.CredentialService_SetCredential_FullMethodName:    write(PermCredentialsWrite),
	pb.CredentialService_DeleteCredential_FullMethodName: write(PermCredentialsWrite),
	pb.CredentialService_ListCredentials_FullMethodName:  read(PermCredentialsRead),

	pb.TeamService_CreateTeam_FullMethodName: write(PermTeamsWrite),
	pb.TeamService_UpdateTeam_FullMethodName: write(PermTeamsWrite),
	pb.TeamService_DeleteTeam_FullMethodName: write(PermTeamsWrite),
	pb.TeamService_ListTeams_FullMethodName:  read(PermTeamsRead),
	pb.TeamService_GetTeam_FullMethodName:    read(PermTeamsRead),

	pb.SpendService_SpendReport_FullMethodName: read(PermSpendRead),
	pb.SpendService_SpendLogs_FullMethodName:   read(PermSpendRead),
	pb.SpendService_NodeLogs_FullMethodName:    read(PermSpendRead),

	pb.ClusterService_Status_FullMethodName:          read(PermClusterRead),
	pb.ClusterService_RemoveNode_FullMethodName:      write(PermClusterWrite),
	pb.ClusterService_RestoreSnapshot_FullMethodName: write(PermClusterWrite),
	pb.ClusterService_SaveSnapshot_FullMethodName:    read(PermClusterBackup),
	pb.ClusterService_WaitApplied_FullMethodName:     read(PermClusterInternal),
	pb.ClusterService_Propose_FullMethodName:         read(PermClusterInternal),

	pb.UserService_CreateUser_FullMethodName: write(PermUsersWrite),
	pb.UserService_RevokeUser_FullMethodName: write(PermUsersWrite),
	pb.UserService_RotateUser_FullMethodName: write(PermUsersWrite),
	pb.UserService_ListUsers_FullMethodName:  read(PermUsersRead),
	pb.UserService_GetUser_FullMethodName:    read(PermUsersRead),
	pb.UserService_WhoAmI_FullMethodName:     read(permAuthenticated),

	pb.UserService_EndConsoleSession_FullMethodName: write(permAuthenticated),

	pb.AuditService_ListAudit_FullMethodName: read(PermAuditRead),

	pb.McpService_AddMcpServer_FullMethodName:    write(PermMcpWrite),
	pb.McpService_RemoveMcpServer_FullMethodName: write(PermMcpWrite),
	pb.McpService_SetMcpTools_FullMethodName:     write(PermMcpWrite),
	pb.McpService_ListMcpServers_FullMethodName:  read(PermMcpRead),
	pb.McpService_GetMcpServer_FullMethodName:    read(PermMcpRead),
	pb.McpService_TestMcpServer_FullMethodName:   read(PermMcpTest),
}

var (
	readOnly = []Permission{PermKeysRead, PermTeamsRead, PermModelsRead, PermCredentialsRead,
		PermSpendRead, PermClusterRead, PermAuditRead, PermMcpRead}
	operator = append(slices.Clone(readOnly), PermKeysWrite, PermTeamsWrite, PermModelsWrite,
		PermModelsTest, PermCredentialsWrite, PermMcpWrite, PermMcpTest)
	// A team-admin's permissions reach only its own team (see scope.go).
	teamAdmin = []Permission{PermKeysRead, PermKeysWrite, PermTeamsRead, PermModelsRead, PermSpendRead}
)

// rolePermissions lists what each role may do; the admin role may do
// everything.
var rolePermissions = map[string][]Permission{
	raftstore.RoleOperator:  operator,
	raftstore.RoleViewer:    readOnly,
	raftstore.RoleTeamAdmin: teamAdmin,
}

// allows reports whether role grants p.
func allows(role string, p Permission) bool {
	if role == raftstore.RoleAdmin || p == permAuthenticated {
		return true
	}
	return slices.Contains(rolePermissions[role], p)
}

// permissionsOf lists the permissions role grants, sorted.
func permissionsOf(role string) []string {
	seen := map[Permission]bool{}
	for _, r := range rules {
		if r.perm != permAuthenticated && allows(role, r.perm) {
			seen[r.perm] = true
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, string(p))
	}
	slices.Sort(out)
	return out
}

// RoleAllows returns the permission the admin RPC fullMethod needs ("" when
// any authenticated caller may make it) and whether role grants it; known
// is false for a method without a rule, which nobody may call.
func RoleAllows(role, fullMethod string) (perm Permission, allowed, known bool) {
	r, known := rules[fullMethod]
	return r.perm, known && allows(role, r.perm), known
}
