package node

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// rateStateFile, in the data dir, holds this node's rate-limit usage of the
// last minute (ratelimit.Limiter.Save), so that a restarted node — also
// after kill -9 — goes on counting what it admitted instead of granting a
// fresh minute. It is written every rateSaveInterval and at shutdown, and
// read at start.
const rateStateFile = "ratelimit.state"

// rateSaveInterval is how often the rate-limit usage is saved: what a
// node admitted in the last interval before a crash is forgotten.
const rateSaveInterval = time.Second

// restoreRateState counts the usage saved by the last run, if any.
func (n *Node) restoreRateState() {
	path := filepath.Join(n.cfg.DataDir, rateStateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		n.log.Warn("cannot read the saved rate-limit usage; starting from zero", "path", path, "err", err)
		return
	}
	k, err := n.limiter.Restore(b)
	if err != nil {
		n.log.Warn("ignoring the saved rate-limit usage", "path", path, "err", err)
		return
	}
	if k > 0 {
		n.log.Info("restored the rate-limit usage of the last minute", "buckets", k)
	}
}

// saveRateState overwrites rateStateFile in place: one write and a
// truncate to the new length, with no fsync. A file replaced by a rename
// every second would reach the disk every second (ext4 flushes a file
// renamed over another); pages overwritten in place reach it at the
// kernel's writeback pace. A process crash keeps what the kernel has. A
// crash between the write and the truncate leaves a file Restore refuses
// (the next start counts from zero, as before saving existed), and a
// machine crash loses at most a minute of rate-limit history.
func (n *Node) saveRateState() error {
	n.rateSaveMu.Lock()
	defer n.rateSaveMu.Unlock()
	if n.rateFile == nil {
		f, err := os.OpenFile(filepath.Join(n.cfg.DataDir, rateStateFile), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		n.rateFile = f
	}
	b := n.limiter.Save()
	if _, err := n.rateFile.WriteAt(b, 0); err != nil {
		return err
	}
	return n.rateFile.Truncate(int64(len(b)))
}

// closeRateState closes the file saveRateState keeps open.
func (n *Node) closeRateState() {
	n.rateSaveMu.Lock()
	defer n.rateSaveMu.Unlock()
	if n.rateFile != nil {
		_ = n.rateFile.Close()
		n.rateFile = nil
	}
}

// orDefault is d, or def when d is not positive: a test-only Config
// interval overriding its default.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// runRateStateSaves saves the usage every rateSaveInterval until ctx ends.
func (n *Node) runRateStateSaves(ctx context.Context) {
	t := time.NewTicker(orDefault(n.cfg.rateSaveInterval, rateSaveInterval))
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		switch err := n.saveRateState(); {
		case err != nil && !failing:
			n.log.Warn("cannot save the rate-limit usage; a restart would forget it", "err", err)
			failing = true
		case err == nil && failing:
			n.log.Info("saving the rate-limit usage again")
			failing = false
		}
	}
}
