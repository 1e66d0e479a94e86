package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// maxSnapshotMsg is the gRPC message size allowed for snapshot calls, the
// same as the server's limit. maxSnapshotFile leaves room for the request
// framing around the data.
const (
	maxSnapshotMsg  = 256 << 20
	maxSnapshotFile = maxSnapshotMsg - 1<<10
)

// snapshotCallOptions lift gRPC's default 4 MiB message limit.
var snapshotCallOptions = []grpc.CallOption{
	grpc.MaxCallRecvMsgSize(maxSnapshotMsg),
	grpc.MaxCallSendMsgSize(maxSnapshotMsg),
}

const restoreWarning = "this replaces ALL keys, routes and credentials of the cluster"

func (a *app) clusterCommand() *cobra.Command {
	cmd := groupCommand("cluster",
		"Show cluster membership, remove nodes, back up and restore",
		`A Tollgate cluster replicates keys, model routes and credentials with Raft.
Any node answers these commands; changes are forwarded to the leader. Calls
that find a node restarting or an election in progress are retried until
--timeout.`,
		`  tollctl cluster status
  tollctl cluster status -o json | jq -r .leader
  tollctl cluster snapshot save backup.snap`)
	cmd.AddCommand(a.clusterStatusCommand(), a.clusterMembersCommand(), a.clusterRemoveCommand(),
		a.clusterSnapshotCommand())
	return cmd
}

// clusterStatus fetches the answering node's view of the cluster.
func (a *app) clusterStatus(cmd *cobra.Command) (*tollgatev1.StatusResponse, error) {
	api, err := a.api()
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.callContext(cmd)
	defer cancel()
	return api.cluster.Status(ctx, &tollgatev1.StatusRequest{})
}

func (a *app) clusterStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the leader, Raft progress and members",
		Long: `Show the cluster as the node at --addr sees it: the leader, the Raft term,
the applied, commit and last log index, this node's Raft state, and every
member. ROLE is voter, nonvoter, or none for a node that gossip knows but
Raft does not. HEALTH is healthy, or what is wrong (suspect, unreachable,
not in raft).

With -o json the output is one object with the fields node, leader, term,
applied_index, commit_index, last_index, raft_state and members; 64-bit
numbers are JSON strings, as protobuf JSON renders them.`,
		Example: `  tollctl cluster status
  tollctl cluster status -o json | jq -r .leader
  tollctl cluster status -o json | jq -r '.members[] | select(.health != "healthy") | .id'`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			st, err := a.clusterStatus(cmd)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printProto(st)
			}
			leader := st.GetLeader()
			if leader == "" {
				leader = "none known (election in progress?)"
			}
			tw := newTable(a.stdout)
			row(tw, "Node:", orDash(st.GetNode()))
			row(tw, "Leader:", leader)
			row(tw, "Term:", strconv.FormatUint(st.GetTerm(), 10))
			row(tw, "Applied index:", strconv.FormatUint(st.GetAppliedIndex(), 10))
			row(tw, "Commit index:", strconv.FormatUint(st.GetCommitIndex(), 10))
			row(tw, "Last index:", strconv.FormatUint(st.GetLastIndex(), 10))
			row(tw, "Raft state:", orDash(st.GetRaftState()))
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout)
			return a.printMembers(st.GetMembers())
		}),
	}
}

func (a *app) clusterMembersCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "members",
		Short: "List cluster members",
		Long: `List the members of the cluster as the node at --addr sees them, as in
cluster status. With -o json the output is an array of members.`,
		Example: `  tollctl cluster members
  tollctl cluster members -o json | jq -r '.[] | "\(.id) \(.role) \(.health)"'`,
		Args: exactArgs(),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			st, err := a.clusterStatus(cmd)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				raw, err := protoJSONList(st.GetMembers())
				if err != nil {
					return err
				}
				return writeJSON(a.stdout, raw)
			}
			return a.printMembers(st.GetMembers())
		}),
	}
}

// printMembers shows the member table.
func (a *app) printMembers(members []*tollgatev1.Member) error {
	if len(members) == 0 {
		fmt.Fprintln(a.stdout, "No members.")
		return nil
	}
	tw := newTable(a.stdout)
	row(tw, "ID", "ROLE", "LEADER", "GOSSIP", "HEALTH", "RAFT-ADDR", "HTTP-ADDR", "ADMIN-ADDR", "VERSION")
	for _, m := range members {
		leader := "no"
		if m.GetLeader() {
			leader = "yes"
		}
		row(tw, m.GetId(), orDash(m.GetRole()), leader, orDash(m.GetGossipState()), orDash(m.GetHealth()),
			orDash(m.GetRaftAddress()), orDash(m.GetHttpAddress()), orDash(m.GetAdminAddress()), orDash(m.GetVersion()))
	}
	return tw.Flush()
}

func (a *app) clusterRemoveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NODE",
		Short: "Remove a node from the cluster",
		Long: `Remove the node with id NODE from Raft at once, e.g. one that died for good.
The node must not come back without being started with --join again. The
leader cannot remove itself: stop it (it hands leadership over) or run this
against another node. Its budget leases return to the budgets. A node that
is no longer a member (the leader removes a dead node after
--dead-node-grace) only has its remaining leases returned. With -o json:
{"not_member": false}, or true for a node that was no longer a member.`,
		Example: `  tollctl cluster remove node-3
  tollctl --addr node-1:4100 cluster remove node-3`,
		Args: exactArgs("node"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.cluster.RemoveNode(ctx, &tollgatev1.RemoveNodeRequest{Id: args[0]})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printProto(resp)
			}
			if resp.GetNotMember() {
				fmt.Fprintf(a.stdout, "Node %s is not a member of the cluster (removed already, or a typo?); any budget leases it held were returned.\n", args[0])
				return nil
			}
			fmt.Fprintf(a.stdout, "Removed node %s from the cluster; its budget leases were returned.\n", args[0])
			return nil
		}),
	}
}

func (a *app) clusterSnapshotCommand() *cobra.Command {
	cmd := groupCommand("snapshot",
		"Back up or restore all keys, routes and credentials",
		`A snapshot holds the whole replicated state of the cluster: keys, model
routes and credentials, including the credentials' secret values. Keep
snapshot files as safe as the credentials themselves.`,
		`  tollctl cluster snapshot save backup.snap
  tollctl cluster snapshot restore backup.snap --yes`)
	cmd.AddCommand(a.snapshotSaveCommand(), a.snapshotRestoreCommand())
	return cmd
}

func (a *app) snapshotSaveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "save FILE",
		Short: "Save the cluster state to a file",
		Long: `Save a snapshot of the whole cluster state to FILE. The file is written
atomically (to a temporary file in the same directory, then renamed) with
mode 0600, because it contains the credentials. FILE "-" writes the snapshot
to standard output and the summary to standard error. With -o json the
summary is an object with file, index and bytes.`,
		Example: `  tollctl cluster snapshot save backup-$(date +%F).snap
  tollctl cluster snapshot save - | gpg -e -r ops > backup.snap.gpg`,
		Args: exactArgs("file"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			file := args[0]
			if file == "-" {
				if f, ok := a.stdout.(*os.File); ok && isTerminal(f) {
					return usageErrorf("refusing to write a binary snapshot to a terminal; redirect standard output or name a file")
				}
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.cluster.SaveSnapshot(ctx, &tollgatev1.SaveSnapshotRequest{}, snapshotCallOptions...)
			if err != nil {
				return err
			}
			data := resp.GetData()
			summary := a.stdout
			if file == "-" {
				if _, err := a.stdout.Write(data); err != nil {
					return fmt.Errorf("writing the snapshot to stdout: %v", err)
				}
				summary = a.stderr
			} else if err := writeFileAtomic(file, data, 0o600); err != nil {
				return err
			}
			if a.jsonOutput() && file != "-" {
				raw, err := json.Marshal(map[string]any{"file": file, "index": resp.GetIndex(), "bytes": len(data)})
				if err != nil {
					return err
				}
				return writeJSON(summary, raw)
			}
			where := file
			if file == "-" {
				where = "stdout"
			}
			fmt.Fprintf(summary, "Saved snapshot at index %d (%d bytes) to %s.\n", resp.GetIndex(), len(data), where)
			return nil
		}),
	}
}

// writeFileAtomic writes data to a temporary file next to name and renames
// it over name, so name is never left half written.
func writeFileAtomic(name string, data []byte, perm fs.FileMode) (err error) {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing the snapshot: %v", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
			err = fmt.Errorf("writing the snapshot to %s: %v", name, err)
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	// Make the rename durable; not every platform can sync a directory.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

func (a *app) snapshotRestoreCommand() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "restore FILE --yes",
		Short: "Replace the whole cluster state with a saved snapshot",
		Long: `Restore a snapshot saved with cluster snapshot save. This replaces ALL keys,
routes and credentials of the cluster, on every node: whatever was created or
changed since the snapshot is lost. FILE "-" reads the snapshot from standard
input.

Without --yes, tollctl asks for confirmation when standard input is a
terminal, and refuses otherwise. With -o json the output is an object with
the counts keys, routes and credentials.`,
		Example: `  tollctl cluster snapshot restore backup.snap
  gpg -d backup.snap.gpg | tollctl cluster snapshot restore - --yes`,
		Args: exactArgs("file"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			file := args[0]
			stdinTerm := false
			if f, ok := a.stdin.(*os.File); ok {
				stdinTerm = isTerminal(f)
			}
			if !yes && (file == "-" || !stdinTerm) {
				return usageErrorf("%s; pass --yes to confirm", restoreWarning)
			}
			data, err := a.readSnapshot(file)
			if err != nil {
				return err
			}
			if !yes {
				ok, err := a.confirm(fmt.Sprintf("Restore %s (%d bytes): %s. Type yes to continue: ", file, len(data), restoreWarning))
				if err != nil {
					return err
				}
				if !ok {
					return errors.New("restore cancelled; nothing was changed")
				}
			}
			api, err := a.api()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd)
			defer cancel()
			resp, err := api.cluster.RestoreSnapshot(ctx, &tollgatev1.RestoreSnapshotRequest{Data: data}, snapshotCallOptions...)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printProto(resp)
			}
			fmt.Fprintf(a.stdout, "Restored snapshot from %s: %d keys, %d routes, %d credentials.\n",
				file, resp.GetKeys(), resp.GetRoutes(), resp.GetCredentials())
			return nil
		}),
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "confirm that the cluster state is replaced, without asking")
	return cmd
}

// readSnapshot reads a snapshot file, or stdin for "-".
func (a *app) readSnapshot(file string) ([]byte, error) {
	var r io.Reader = a.stdin
	name := "stdin"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, usageErrorf("cannot read the snapshot: %v", err)
		}
		defer f.Close()
		r, name = f, file
	}
	data, err := io.ReadAll(io.LimitReader(r, maxSnapshotFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading the snapshot from %s: %v", name, err)
	}
	switch {
	case len(data) == 0:
		return nil, usageErrorf("the snapshot in %s is empty", name)
	case len(data) > maxSnapshotFile:
		return nil, usageErrorf("the snapshot in %s is larger than %d bytes", name, maxSnapshotFile)
	}
	return data, nil
}

// confirm shows prompt on stderr and reads the answer from stdin; only
// "yes" or "y" confirms.
func (a *app) confirm(prompt string) (bool, error) {
	fmt.Fprint(a.stderr, prompt)
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("reading the answer: %v", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "yes", "y":
		return true, nil
	}
	return false, nil
}
