package raftstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Server is one member of the Raft configuration.
type Server struct {
	ID      string
	Address string
	Voter   bool
}

// membershipTimeout bounds a membership change.
const membershipTimeout = 10 * time.Second

// Servers returns the current Raft configuration.
func (s *Store) Servers() ([]Server, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raftstore: read configuration: %w", err)
	}
	var out []Server
	for _, srv := range f.Configuration().Servers {
		out = append(out, Server{ID: string(srv.ID), Address: string(srv.Address), Voter: srv.Suffrage == raft.Voter})
	}
	return out, nil
}

func (s *Store) inConfiguration() bool {
	srvs, err := s.Servers()
	if err != nil {
		return false
	}
	for _, srv := range srvs {
		if srv.ID == s.cfg.NodeID {
			return true
		}
	}
	return false
}

// BootstrapWith bootstraps a new cluster whose voters are servers. Every
// node that bootstraps must pass the same servers; a node that already has
// Raft state returns nil without change.
func (s *Store) BootstrapWith(servers []Server) error {
	cfg := raft.Configuration{}
	for _, srv := range servers {
		cfg.Servers = append(cfg.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(srv.ID), Address: raft.ServerAddress(srv.Address)})
	}
	err := s.raft.BootstrapCluster(cfg).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("raftstore: bootstrap: %w", err)
	}
	return nil
}

// AddServer adds (or re-adds with a new address) a voter or non-voter.
// Only the leader can change the configuration.
func (s *Store) AddServer(srv Server) error {
	var f raft.IndexFuture
	if srv.Voter {
		f = s.raft.AddVoter(raft.ServerID(srv.ID), raft.ServerAddress(srv.Address), 0, membershipTimeout)
	} else {
		f = s.raft.AddNonvoter(raft.ServerID(srv.ID), raft.ServerAddress(srv.Address), 0, membershipTimeout)
	}
	return membershipErr("add server "+srv.ID, f.Error())
}

// RemoveServer removes a member from the configuration. Only the leader
// can change the configuration.
func (s *Store) RemoveServer(id string) error {
	return membershipErr("remove server "+id, s.raft.RemoveServer(raft.ServerID(id), 0, membershipTimeout).Error())
}

// TransferLeadership hands leadership to another voter and waits for it.
func (s *Store) TransferLeadership() error {
	return membershipErr("transfer leadership", s.raft.LeadershipTransfer().Error())
}

func membershipErr(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("raftstore: %s: %w", what, ErrNotLeader)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	}
	return fmt.Errorf("raftstore: %s: %w", what, err)
}

// Progress is Raft's view of this node's log.
type Progress struct {
	Term, LastIndex, CommitIndex, AppliedIndex uint64
	// LastContact is when a follower last heard from the leader.
	LastContact time.Time
}

// Progress returns this node's term and log positions.
func (s *Store) Progress() Progress {
	return Progress{Term: s.raft.CurrentTerm(), LastIndex: s.raft.LastIndex(), CommitIndex: s.raft.CommitIndex(),
		AppliedIndex: s.raft.AppliedIndex(), LastContact: s.raft.LastContact()}
}
