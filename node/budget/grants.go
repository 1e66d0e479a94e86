package budget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// Lease requests of one node go to the leader in batches: group commit.
// While no batch is in flight a request is proposed at once (alone); the
// requests that arrive while one is in flight are proposed together, as one
// GrantLeases entry, as soon as it ends. A node whose many budgets run low
// at once so writes a few Raft entries, not one per budget, and a lone
// request waits for nothing.

// MaxGrantBatch is the most lease requests one GrantLeases entry carries.
const MaxGrantBatch = 256

// singleFallback is how long a node proposes single GrantLease entries
// after the leader refused a GrantLeases entry (a member of an older
// release during a rolling upgrade) before it tries a batch again.
const singleFallback = 30 * time.Second

type grantWaiter struct {
	g    *pb.GrantLeaseCommand
	done chan error // buffered: the batch never blocks on a waiter that left
}

type grantBatcher struct {
	m *Manager

	mu          sync.Mutex
	queue       []*grantWaiter
	flushing    bool
	singleUntil time.Time
}

// grant asks the leader for the lease g, batched with this node's other
// lease requests, and returns once it was applied here (or failed), ctx
// ended or deadline passed.
func (b *grantBatcher) grant(ctx context.Context, g *pb.GrantLeaseCommand, deadline time.Time) error {
	b.mu.Lock()
	if time.Now().Before(b.singleUntil) {
		b.mu.Unlock()
		return b.single(ctx, g, deadline)
	}
	w := &grantWaiter{g: g, done: make(chan error, 1)}
	b.queue = append(b.queue, w)
	if !b.flushing {
		b.flushing = true
		go b.flushLoop()
	}
	b.mu.Unlock()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(deadline)):
		return errGrantTimeout
	}
}

// single proposes g alone, as a GrantLease entry.
func (b *grantBatcher) single(ctx context.Context, g *pb.GrantLeaseCommand, deadline time.Time) error {
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	_, err := b.m.propose(cctx, &pb.Command{Op: &pb.Command_GrantLease{GrantLease: g}})
	return err
}

// flushLoop proposes the queued requests, at most MaxGrantBatch per entry,
// one entry at a time, until the queue is empty.
func (b *grantBatcher) flushLoop() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), MaxGrantBatch)
		if n == 0 {
			b.flushing = false
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = append([]*grantWaiter(nil), b.queue[n:]...)
		b.mu.Unlock()
		b.propose(batch)
	}
}

// propose sends one batch and hands every waiter its outcome. A batch of
// one goes as a GrantLease entry (which every release applies).
func (b *grantBatcher) propose(batch []*grantWaiter) {
	ctx, cancel := context.WithTimeout(context.Background(), b.m.cfg.GrantWait)
	defer cancel()
	if len(batch) == 1 {
		_, err := b.m.propose(ctx, &pb.Command{Op: &pb.Command_GrantLease{GrantLease: batch[0].g}})
		batch[0].done <- err
		return
	}
	b.mu.Lock()
	single := time.Now().Before(b.singleUntil)
	b.mu.Unlock()
	if single { // queued before an earlier batch was refused
		b.proposeSingly(ctx, batch)
		return
	}
	cmd := &pb.GrantLeasesCommand{Grants: make([]*pb.GrantLeaseCommand, len(batch))}
	for i, w := range batch {
		cmd.Grants[i] = w.g
	}
	res, err := b.m.propose(ctx, &pb.Command{Op: &pb.Command_GrantLeases{GrantLeases: cmd}})
	if errors.Is(err, raftstore.ErrCommandRefused) {
		// Some member does not apply GrantLeases yet: one entry per
		// request, as older releases do, for a while.
		b.m.cfg.Logger.Info("leader refused a batch of lease requests; asking one by one", "err", err)
		b.mu.Lock()
		b.singleUntil = time.Now().Add(singleFallback)
		b.mu.Unlock()
		b.proposeSingly(ctx, batch)
		return
	}
	// Without a result (a follower's proposal) every grant counts as
	// applied: its waiter looks at the replicated state again anyway.
	var outcomes []*pb.GrantLeaseOutcome
	if r, ok := res.(*pb.GrantLeasesResult); ok {
		outcomes = r.GetOutcomes()
	}
	for i, w := range batch {
		switch {
		case err != nil:
			w.done <- err
		case i < len(outcomes) && outcomes[i].GetError() != "":
			w.done <- fmt.Errorf("lease of budget %s: %s", w.g.GetBudget(), outcomes[i].GetError())
		default:
			w.done <- nil
		}
	}
}

// proposeSingly proposes every request of batch as its own GrantLease
// entry, at once.
func (b *grantBatcher) proposeSingly(ctx context.Context, batch []*grantWaiter) {
	var wg sync.WaitGroup
	for _, w := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.m.propose(ctx, &pb.Command{Op: &pb.Command_GrantLease{GrantLease: w.g}})
			w.done <- err
		}()
	}
	wg.Wait()
}

// propose applies cmd through the configured proposer; the result is nil
// when the proposer yields none (Config.Propose, or a follower's proposal
// through the leader).
func (m *Manager) propose(ctx context.Context, cmd *pb.Command) (proto.Message, error) {
	if m.cfg.ProposeResult != nil {
		return m.cfg.ProposeResult(ctx, cmd)
	}
	return nil, m.cfg.Propose(ctx, cmd)
}
