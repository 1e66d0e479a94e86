package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// The budgets scenario (issue 12, item 5): many budgeted keys in use at
// once. One node gets N keys, each with its own monthly budget (imported
// with tollctl key import), and closed-loop clients spread requests over
// all of them for a bounded time. Every sample interval the harness reads
// the node's CPU (/proc), its Raft last index (ClusterService.Status), the
// Raft log's growth (raftLogMB: entry bytes appended to the WAL, or the
// size of raft.db in a bolt data dir) and the RSS: what budget bookkeeping
// (lease grants, spend reports) costs in Raft entries, log growth and CPU.

// BudgetsConfig bounds the budgets run.
type BudgetsConfig struct {
	Keys        int           `json:"keys"`
	Dur         time.Duration `json:"duration_ns"`
	Clients     int           `json:"clients"`
	Sample      time.Duration `json:"sample_ns"`
	MaxRequests int64         `json:"max_requests"`
}

// BudgetsSample is one interval of the run.
type BudgetsSample struct {
	Second          float64 `json:"second"` // end of the interval, from the start of traffic
	Requests        int64   `json:"requests"`
	EntriesPerSec   float64 `json:"raft_entries_per_second"`
	CPUPercent      float64 `json:"cpu_percent"`
	RaftDBMB        float64 `json:"raft_db_mb"`
	RSSMB           float64 `json:"rss_mb"`
	CPUPerRequestMs float64 `json:"cpu_per_request_ms"`
}

// BudgetsResults is the report of a budgets run.
type BudgetsResults struct {
	Date           string           `json:"date"`
	Command        string           `json:"command"`
	Machine        Machine          `json:"machine"`
	Config         BudgetsConfig    `json:"config"`
	ImportSeconds  float64          `json:"import_seconds"`
	Requests       int64            `json:"requests"`
	Status         map[int]int64    `json:"status"`
	Errors         int64            `json:"transport_errors"`
	Seconds        float64          `json:"traffic_seconds"`
	Entries        uint64           `json:"raft_entries"`
	EntriesPerSec  float64          `json:"raft_entries_per_second"`
	RaftLogMeasure string           `json:"raft_log_measure"` // raftLogWAL or raftLogBolt
	RaftDBStartMB  float64          `json:"raft_db_start_mb"`
	RaftDBEndMB    float64          `json:"raft_db_end_mb"`
	GrowthMBMin    float64          `json:"raft_db_growth_mb_per_minute"`
	CPUSeconds     float64          `json:"cpu_seconds"`
	RSSStartMB     float64          `json:"rss_start_mb"`
	RSSEndMB       float64          `json:"rss_end_mb"`
	Samples        []*BudgetsSample `json:"samples"`
	Err            string           `json:"error,omitempty"`
}

func budgetSecret(i int) string { return fmt.Sprintf("sk-budget-%012d-0123456789", i) }

// runBudgets runs the budgets scenario on a fresh node and mock.
func runBudgets(bin *Binaries, tmp string, cfg BudgetsConfig, res *BudgetsResults, logf func(string, ...any)) error {
	mockAddr, err := freeAddr()
	if err != nil {
		return err
	}
	mock, err := startChild("mockllm", filepath.Join(tmp, "mockllm.log"), "", nil, bin.Mockllm, "--addr", mockAddr, "--quiet")
	if err != nil {
		return err
	}
	if _, err := waitStatus(mock, "http://"+mockAddr+"/v1/models", 200, 10*time.Millisecond, 30*time.Second); err != nil {
		return err
	}
	gw, err := newGateway(bin, tmp, "")
	if err != nil {
		return err
	}
	if _, err := gw.Start(); err != nil {
		return err
	}
	defer func() { _ = gw.Stop() }()
	if _, err := gw.ctl("model", "add", "bench", "--provider", "openai-compatible", "--base-url", "http://"+mockAddr+"/v1",
		"--upstream-model", "m?size=200", "--input-price", "1", "--output-price", "2"); err != nil {
		return err
	}
	t0 := time.Now()
	if err := budgetsImport(gw, tmp, cfg.Keys); err != nil {
		return err
	}
	res.ImportSeconds = time.Since(t0).Seconds()
	logf("budgets: %d budgeted keys imported in %.1f s", cfg.Keys, res.ImportSeconds)
	conn, err := grpc.NewClient(gw.Admin, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(benchToken(gw.Token)))
	if err != nil {
		return err
	}
	defer conn.Close()
	return budgetsTraffic(gw, pb.NewClusterServiceClient(conn), cfg, res, logf)
}

// budgetsImport imports keys 0..n-1, each with a budget of its own.
func budgetsImport(gw *Gateway, tmp string, n int) error {
	file := filepath.Join(tmp, "budgets-import.jsonl")
	fh, err := os.Create(file)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	for i := range n {
		fmt.Fprintf(w, `{"name":"budget-%d","models":["bench*"],"budget":"1000","period":"month","secret":%q}`+"\n", i, budgetSecret(i))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}
	defer os.Remove(file)
	_, err = gw.ctl("--timeout", "10m", "key", "import", file, "--import-id", "budgets", "--batch", "5000", "-o", "json")
	return err
}

// budgetsProbe is one reading of the node.
type budgetsProbe struct {
	at       time.Time
	index    uint64
	ticks    uint64
	raftDB   float64 // raftLogMB
	measure  string
	rss      float64
	requests int64
}

// probeBudgets samples the node; the WAL's log is measured from index
// after (the start's last index), or from the probe's own index when 0.
func probeBudgets(gw *Gateway, cluster pb.ClusterServiceClient, requests int64, after uint64) (budgetsProbe, error) {
	p := budgetsProbe{at: time.Now(), requests: requests}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cluster.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return p, err
	}
	p.index = st.GetLastIndex()
	if p.ticks, err = cpuTicks(gw.Pid()); err != nil {
		return p, err
	}
	if p.raftDB, p.measure, err = raftLogMB(filepath.Join(gw.dir, "raft"), cmp.Or(after, p.index)); err != nil {
		return p, err
	}
	p.rss, _ = rssMB(gw.Pid())
	return p, nil
}

// budgetsTraffic runs the clients over every key and samples the node.
func budgetsTraffic(gw *Gateway, cluster pb.ClusterServiceClient, cfg BudgetsConfig, res *BudgetsResults, logf func(string, ...any)) error {
	var next, done, transportErrs atomic.Int64
	var mu sync.Mutex
	res.Status = map[int]int64{}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Clients}}
	url := "http://" + gw.HTTP + "/v1/chat/completions"
	body := []byte(`{"model":"bench","messages":[{"role":"user","content":"hello"}],"max_tokens":50}`)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start, err := probeBudgets(gw, cluster, 0, 0)
	if err != nil {
		return err
	}
	for range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := next.Add(1) - 1
				if i >= cfg.MaxRequests {
					return
				}
				code := budgetsRequest(client, url, body, budgetSecret(int(i%int64(cfg.Keys))))
				done.Add(1)
				if code == 0 {
					transportErrs.Add(1)
					continue
				}
				mu.Lock()
				res.Status[code]++
				mu.Unlock()
			}
		}()
	}
	prev := start
	end := start.at.Add(cfg.Dur)
	for time.Now().Before(end) {
		time.Sleep(min(cfg.Sample, time.Until(end)))
		p, err := probeBudgets(gw, cluster, done.Load(), start.index)
		if err != nil {
			close(stop)
			wg.Wait()
			return err
		}
		res.Samples = append(res.Samples, budgetsSample(start, prev, p))
		s := res.Samples[len(res.Samples)-1]
		logf("budgets: %3.0f s: %d requests, %.1f Raft entries/s, CPU %.0f%%, Raft log %.2f MB, RSS %.0f MB",
			s.Second, p.requests, s.EntriesPerSec, s.CPUPercent, s.RaftDBMB, s.RSSMB)
		prev = p
	}
	close(stop)
	wg.Wait()
	res.Requests, res.Errors = done.Load(), transportErrs.Load()
	secs := prev.at.Sub(start.at).Seconds()
	res.Seconds = secs
	res.Entries = prev.index - start.index
	res.EntriesPerSec = float64(res.Entries) / secs
	res.RaftLogMeasure = start.measure
	res.RaftDBStartMB, res.RaftDBEndMB = start.raftDB, prev.raftDB
	res.GrowthMBMin = (prev.raftDB - start.raftDB) / secs * 60
	res.CPUSeconds = float64(prev.ticks-start.ticks) / 100
	res.RSSStartMB, res.RSSEndMB = start.rss, prev.rss
	return nil
}

func budgetsSample(start, prev, p budgetsProbe) *BudgetsSample {
	dt := p.at.Sub(prev.at).Seconds()
	s := &BudgetsSample{Second: p.at.Sub(start.at).Seconds(), Requests: p.requests - prev.requests,
		EntriesPerSec: float64(p.index-prev.index) / dt, CPUPercent: float64(p.ticks-prev.ticks) / dt,
		RaftDBMB: p.raftDB, RSSMB: p.rss}
	if s.Requests > 0 {
		s.CPUPerRequestMs = float64(p.ticks-prev.ticks) * 10 / float64(s.Requests)
	}
	return s
}

// budgetsRequest sends one chat request with the key's secret and returns
// the status, or 0 when the request failed in transport.
func budgetsRequest(client *http.Client, url string, body []byte, secret string) int {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// write puts the budgets report into dir.
func (r *BudgetsResults) write(dir string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Tollgate budgets run — %s\n\n", r.Date)
	fmt.Fprintf(&b, "`%s` on %d cores (%s). One node and mockllm on loopback; %d keys, each with a monthly\n", r.Command, r.Machine.NProc, r.Machine.CPUModel, r.Config.Keys)
	fmt.Fprintf(&b, "budget of its own, imported with `tollctl key import` in %.1f s; then %d closed-loop clients send\n", r.ImportSeconds, r.Config.Clients)
	fmt.Fprintf(&b, "chat requests spread round-robin over every key for %v. CPU is the node's user+system time from /proc\n", r.Config.Dur)
	b.WriteString("(10 ms ticks); Raft entries from the node's last log index (ClusterService.Status).\n")
	if r.RaftLogMeasure == raftLogWAL {
		b.WriteString("Raft log: the encoded bytes of the entries appended to the WAL since traffic started, read from its\n")
		b.WriteString("segments (raft-wal DumpLogs); the segment files are preallocated, so their size says nothing.\n\n")
	} else {
		b.WriteString("Raft log: the size of the log's Bolt file, raft.db.\n\n")
	}
	fmt.Fprintf(&b, "| requests | status | transport errors | Raft entries | entries/s | Raft log start → end | growth | node CPU | CPU per request | RSS start → end |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	perReq := 0.0
	if r.Requests > 0 {
		perReq = r.CPUSeconds * 1000 / float64(r.Requests)
	}
	fmt.Fprintf(&b, "| %d | %v | %d | %d | %.1f | %.2f → %.2f MB | %.2f MB/min | %.1f s | %.3f ms | %.0f → %.0f MB |\n\n",
		r.Requests, r.Status, r.Errors, r.Entries, r.EntriesPerSec, r.RaftDBStartMB, r.RaftDBEndMB, r.GrowthMBMin, r.CPUSeconds, perReq, r.RSSStartMB, r.RSSEndMB)
	b.WriteString("Per interval:\n\n| second | requests | Raft entries/s | node CPU | CPU per request | Raft log | RSS |\n|---|---|---|---|---|---|---|\n")
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "| %.0f | %d | %.1f | %.0f%% | %.3f ms | %.2f MB | %.0f MB |\n", s.Second, s.Requests, s.EntriesPerSec, s.CPUPercent, s.CPUPerRequestMs, s.RaftDBMB, s.RSSMB)
	}
	if r.Err != "" {
		fmt.Fprintf(&b, "\nStopped: %s\n", r.Err)
	}
	return writeReport(dir, r, b.String())
}
