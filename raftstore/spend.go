package raftstore

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodWeek  = "week"
	PeriodMonth = "month"
	PeriodTotal = "total"
)

// Limit is a budget as the data plane needs it.
type Limit struct {
	// ID names the budget: "key:ID" or "team:ID".
	ID            string
	LimitNanos    int64
	Period        string
	AllowUnpriced bool
}

// Team is the data plane's view of a team.
type Team struct {
	ID     string
	Name   string
	Budget *Limit
	Limits *RateLimits
}

// KeyBudgetID and TeamBudgetID name the budget of a key or a team.
func KeyBudgetID(id string) string  { return "key:" + id }
func TeamBudgetID(id string) string { return "team:" + id }

// PeriodStart returns the start (Unix seconds, UTC) of the period that
// contains t; 0 for a total budget.
func PeriodStart(period string, t time.Time) int64 {
	t = t.UTC()
	switch period {
	case PeriodDay:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).Unix()
	case PeriodWeek:
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		back := (int(d.Weekday()) + 6) % 7 // days since Monday
		return d.AddDate(0, 0, -back).Unix()
	case PeriodMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).Unix()
	}
	return 0
}

// PeriodReset returns when the period that started at start ends (Unix
// seconds); 0 for a total budget, which never resets.
func PeriodReset(period string, start int64) int64 {
	t := time.Unix(start, 0).UTC()
	switch period {
	case PeriodDay:
		return t.AddDate(0, 0, 1).Unix()
	case PeriodWeek:
		return t.AddDate(0, 0, 7).Unix()
	case PeriodMonth:
		return t.AddDate(0, 1, 0).Unix()
	}
	return 0
}

// ValidateBudget checks a budget's fields.
func ValidateBudget(b *pb.Budget) error {
	if b == nil {
		return nil
	}
	if b.GetLimitNanos() <= 0 {
		return fmt.Errorf("budget limit must be positive: %w", ErrInvalid)
	}
	switch b.GetPeriod() {
	case PeriodDay, PeriodWeek, PeriodMonth, PeriodTotal:
	default:
		return fmt.Errorf("budget period %q: want day, week, month or total: %w", b.GetPeriod(), ErrInvalid)
	}
	return nil
}

func limitOf(id string, b *pb.Budget) *Limit {
	if b == nil {
		return nil
	}
	return &Limit{ID: id, LimitNanos: b.GetLimitNanos(), Period: b.GetPeriod(), AllowUnpriced: b.GetAllowUnpriced()}
}

// Team returns the team with the given id, or nil.
func (s *State) Team(id string) *Team {
	if e := s.team(id); e != nil {
		return e.view
	}
	return nil
}

// TeamConfig returns the stored team, or nil. It must not be modified.
func (s *State) TeamConfig(id string) *pb.Team {
	if e := s.team(id); e != nil {
		return e.cfg
	}
	return nil
}

// Teams returns every team sorted by name, then id.
func (s *State) Teams() []*pb.Team {
	out := make([]*pb.Team, 0, s.teams.Len())
	s.teams.ascend(func(e named[*teamEntry]) bool {
		out = append(out, e.v.cfg)
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].GetName() != out[j].GetName() {
			return out[i].GetName() < out[j].GetName()
		}
		return out[i].GetId() < out[j].GetId()
	})
	return out
}

// KeysOfTeam returns the ids of the keys that belong to a team, sorted.
func (s *State) KeysOfTeam(team string) []string {
	var ids []string
	s.keysByTeam.ascendFrom(&Key{TeamID: team}, func(k *Key) bool {
		if k.TeamID != team {
			return false
		}
		ids = append(ids, k.ID)
		return true
	})
	return ids
}

// BudgetLimit returns the configured budget with the given id, or nil.
func (s *State) BudgetLimit(id string) *Limit {
	kind, ref, _ := strings.Cut(id, ":")
	switch kind {
	case "key":
		if k := s.KeyByID(ref); k != nil {
			return k.Budget
		}
	case "team":
		if t := s.Team(ref); t != nil {
			return t.Budget
		}
	}
	return nil
}

// BudgetPeriod returns the accounting of a budget in the period that
// started at start, or nil when nothing was granted or spent in it. It
// must not be modified.
func (s *State) BudgetPeriod(budget string, start int64) *pb.BudgetPeriod {
	if it, ok := s.periods.get(periodItem{budget: budget, start: start}); ok {
		return it.bp
	}
	return nil
}

// NodeSeq returns the last spend report applied for node.
func (s *State) NodeSeq(node string) uint64 { return s.nodeSeqs[node] }

// clusterSecretName is the additional data the cluster secret is sealed
// with: not a valid credential name, so neither opens as the other.
const clusterSecretName = "\x00cluster-secret"

// ClusterSecret returns the secret nodes authenticate each other with,
// opened if it is sealed; "" when there is none or this node cannot open
// it (it then cannot call the others, nor they it).
func (s *State) ClusterSecret() string {
	v, err := s.sealer.Open(clusterSecretName, s.clusterSecret)
	if err != nil {
		return ""
	}
	return v
}

// StoredClusterSecret is the cluster secret as stored (sealed or not).
func (s *State) StoredClusterSecret() string { return s.clusterSecret }

// ClusterSecretNeedsSeal reports whether the stored cluster secret should
// be sealed (again) with this node's key (see NeedsSeal).
func (s *State) ClusterSecretNeedsSeal() bool {
	return s.clusterSecret != "" && s.NeedsSeal(clusterSecretName, s.clusterSecret)
}

// SealClusterSecret returns the value to store for the cluster secret:
// sealed when this node has a secrets key, else secret itself.
func (s *State) SealClusterSecret(secret string) (string, error) {
	return s.SealCredential(clusterSecretName, secret)
}

// putTeam returns a copy of s with t stored.
func (s *State) putTeam(t *pb.Team) *State {
	n := *s
	txn := s.teams.txn()
	txn.put(newTeamEntry(t))
	n.teams = txn.commit()
	return &n
}

func createTeam(cur *State, c *pb.CreateTeamCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	t := c.GetTeam()
	if t.GetId() == "" || t.GetName() == "" {
		return nil, nil, fmt.Errorf("team id and name must not be empty: %w", ErrInvalid)
	}
	if cur.team(t.GetId()) != nil {
		return nil, nil, fmt.Errorf("team %q: %w", t.GetId(), ErrAlreadyExists)
	}
	if err := ValidateBudget(t.GetBudget()); err != nil {
		return nil, nil, err
	}
	if err := ValidateRateLimits(t.GetLimits()); err != nil {
		return nil, nil, err
	}
	t = proto.Clone(t).(*pb.Team)
	t.Limits = emptyToNil(t.Limits)
	t.CreatedAt, t.UpdatedAt = ts, ts
	return cur.putTeam(t), t, nil
}

func updateTeam(cur *State, u *pb.UpdateTeamRequest, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	old := cur.TeamConfig(u.GetId())
	if old == nil {
		return nil, nil, fmt.Errorf("team %q: %w", u.GetId(), ErrNotFound)
	}
	t := proto.Clone(old).(*pb.Team)
	if u.Name != nil {
		if u.GetName() == "" {
			return nil, nil, fmt.Errorf("team name must not be empty: %w", ErrInvalid)
		}
		t.Name = u.GetName()
	}
	if u.GetClearBudget() {
		t.Budget = nil
	} else if u.Budget != nil {
		if err := ValidateBudget(u.GetBudget()); err != nil {
			return nil, nil, err
		}
		t.Budget = u.GetBudget()
	}
	if u.Limits != nil {
		if err := ValidateRateLimits(u.GetLimits()); err != nil {
			return nil, nil, err
		}
		t.Limits = emptyToNil(u.GetLimits())
	}
	mergeMetadata(&t.Metadata, u.GetMetadata())
	t.UpdatedAt = ts
	return cur.putTeam(t), t, nil
}

func mergeMetadata(dst *map[string]string, src map[string]string) {
	for k, v := range src {
		if v == "" {
			delete(*dst, k)
			continue
		}
		if *dst == nil {
			*dst = map[string]string{}
		}
		(*dst)[k] = v
	}
}

func deleteTeam(cur *State, id string) (*State, error) {
	if cur.team(id) == nil {
		return nil, fmt.Errorf("team %q: %w", id, ErrNotFound)
	}
	if keys := cur.KeysOfTeam(id); len(keys) > 0 {
		return nil, fmt.Errorf("team %q still has %d key(s), e.g. %s (revoked keys count too): move them out first with tollctl key update KEY --team '': %w",
			id, len(keys), keys[0], ErrFailedPrecondition)
	}
	next := *cur
	txn := cur.teams.txn()
	txn.delete(named[*teamEntry]{k: id})
	next.teams = txn.commit()
	return &next, nil
}

// MaxSpendReportItems is the most rollups plus budget uses a node should
// put in one spend report; a node with more spend to report sends several
// reports (each with its own seq). The state machine applies a report of
// any size, in time proportional to its size, so that reports from nodes
// of older releases, which did not chunk, still count.
const MaxSpendReportItems = 2000

// spendReport adds a node's rollup deltas to the totals and settles its
// budget spend against its leases, once per seq.
func spendReport(cur *State, c *pb.SpendReportCommand, nowNanos int64) (*State, error) {
	if c.GetNode() == "" || c.GetSeq() == 0 {
		return nil, fmt.Errorf("spend report needs a node and a seq: %w", ErrInvalid)
	}
	if c.GetSeq() <= cur.nodeSeqs[c.GetNode()] {
		return nil, nil // a replay or a retry: already counted
	}
	next := *cur
	next.nodeSeqs = maps.Clone(cur.nodeSeqs)
	next.nodeSeqs[c.GetNode()] = c.GetSeq()
	txn := cur.rollups.txn()
	for _, d := range c.GetRollups() {
		r := &pb.SpendRollup{HourUnix: d.GetHourUnix(), KeyId: d.GetKeyId(), TeamId: d.GetTeamId(), Model: d.GetModel()}
		if old, ok := txn.get(d); ok {
			r = proto.Clone(old).(*pb.SpendRollup)
		}
		addRollup(r, d)
		txn.put(r)
	}
	compactRollups(&next, txn, nowNanos)
	pw := cur.periodWriter()
	for _, u := range c.GetBudgets() {
		bp := &pb.BudgetPeriod{Budget: u.GetBudget(), PeriodStart: u.GetPeriodStart()}
		if old := pw.get(u.GetBudget(), u.GetPeriodStart()); old != nil {
			bp = proto.Clone(old).(*pb.BudgetPeriod)
		}
		bp.SpentNanos += u.GetSpentNanos()
		if l := bp.GetLeases()[c.GetNode()]; l > 0 {
			bp.Leases[c.GetNode()] = max(l-u.GetSpentNanos(), 0)
		}
		pw.put(bp)
	}
	pw.commit(&next)
	return &next, nil
}

// grantLease gives a node up to want of what is left of a budget period:
// spent plus every lease never exceeds the limit.
func grantLease(cur *State, c *pb.GrantLeaseCommand) (*State, proto.Message, error) {
	lim := cur.BudgetLimit(c.GetBudget())
	if lim == nil {
		return nil, nil, fmt.Errorf("budget %q does not exist: %w", c.GetBudget(), ErrNotFound)
	}
	if c.GetNode() == "" || c.GetWantNanos() <= 0 {
		return nil, nil, fmt.Errorf("lease request needs a node and a positive amount: %w", ErrInvalid)
	}
	bp := &pb.BudgetPeriod{Budget: c.GetBudget(), PeriodStart: c.GetPeriodStart()}
	if old := cur.BudgetPeriod(c.GetBudget(), c.GetPeriodStart()); old != nil {
		bp = proto.Clone(old).(*pb.BudgetPeriod)
	}
	left := lim.LimitNanos - bp.GetSpentNanos()
	for _, l := range bp.GetLeases() {
		left -= l
	}
	grant := min(c.GetWantNanos(), left)
	if grant <= 0 {
		return nil, bp, nil
	}
	if bp.Leases == nil {
		bp.Leases = map[string]int64{}
	}
	bp.Leases[c.GetNode()] += grant
	next := *cur
	pw := cur.periodWriter()
	pw.put(bp)
	pruneOldPeriods(cur, pw, c.GetBudget(), previousPeriodStart(lim.Period, c.GetPeriodStart()))
	pw.commit(&next)
	return &next, bp, nil
}

// pruneOldPeriods drops a budget's periods that started before keepFrom:
// history. A budget's periods are adjacent and oldest first, so the walk
// stops at the first period it keeps.
func pruneOldPeriods(cur *State, pw *periodWriter, budget string, keepFrom int64) {
	var old []int64
	cur.periods.ascendFrom(periodItem{budget: budget, start: math.MinInt64}, func(it periodItem) bool {
		if it.budget != budget || it.start >= keepFrom {
			return false
		}
		old = append(old, it.start)
		return true
	})
	for _, start := range old {
		pw.delete(budget, start)
	}
}

// grantLeases applies many lease requests in order, each as grantLease
// does; one failing does not stop the others.
func grantLeases(cur *State, c *pb.GrantLeasesCommand) (*State, proto.Message) {
	res := &pb.GrantLeasesResult{Outcomes: make([]*pb.GrantLeaseOutcome, 0, len(c.GetGrants()))}
	st := cur
	for _, g := range c.GetGrants() {
		next, val, err := grantLease(st, g)
		o := &pb.GrantLeaseOutcome{}
		if err != nil {
			o.Error = err.Error()
		} else {
			o.Period, _ = val.(*pb.BudgetPeriod)
		}
		if next != nil {
			st = next
		}
		res.Outcomes = append(res.Outcomes, o)
	}
	if st == cur {
		return nil, res
	}
	return st, res
}

func previousPeriodStart(period string, start int64) int64 {
	t := time.Unix(start, 0).UTC()
	switch period {
	case PeriodDay:
		return t.AddDate(0, 0, -1).Unix()
	case PeriodWeek:
		return t.AddDate(0, 0, -7).Unix()
	case PeriodMonth:
		return t.AddDate(0, -1, 0).Unix()
	}
	return 0
}

func returnLease(cur *State, c *pb.ReturnLeaseCommand) (*State, error) {
	old := cur.BudgetPeriod(c.GetBudget(), c.GetPeriodStart())
	if old == nil || old.GetLeases()[c.GetNode()] == 0 {
		return nil, nil
	}
	bp := proto.Clone(old).(*pb.BudgetPeriod)
	delete(bp.Leases, c.GetNode())
	next := *cur
	pw := cur.periodWriter()
	pw.put(bp)
	pw.commit(&next)
	return &next, nil
}

func releaseNode(cur *State, node string) (*State, error) {
	if node == "" {
		return nil, nil
	}
	var held []leaseItem
	cur.leasesByNode.ascendFrom(leaseItem{node: node, start: math.MinInt64}, func(it leaseItem) bool {
		if it.node != node {
			return false
		}
		held = append(held, it)
		return true
	})
	if len(held) == 0 {
		return nil, nil
	}
	next := *cur
	pw := cur.periodWriter()
	for _, it := range held {
		old := pw.get(it.budget, it.start)
		if old.GetLeases()[node] == 0 {
			continue // a settled lease keeps its entry, as it always has
		}
		bp := proto.Clone(old).(*pb.BudgetPeriod)
		delete(bp.Leases, node)
		pw.put(bp)
	}
	pw.commit(&next)
	return &next, nil
}

func setClusterSecret(cur *State, c *pb.SetClusterSecretCommand) (*State, error) {
	secret := c.GetSecret()
	if of := c.GetResealOf(); of != "" {
		if cur.clusterSecret != of || !IsSealed(secret) {
			return nil, nil // changed meanwhile, or not a reseal: nothing to do
		}
	} else if cur.clusterSecret != "" {
		return nil, nil
	}
	if len(secret) < 16 {
		return nil, fmt.Errorf("cluster secret too short: %w", ErrInvalid)
	}
	next := *cur
	next.clusterSecret = secret
	return &next, nil
}

// RateLimits are a key's, team's or deployment's rate limits; zero fields
// are unlimited. Bucket names the limiter bucket ("key:ID", "team:ID",
// "dep:ROUTE/DEPLOYMENT"), built once here rather than per request.
type RateLimits struct {
	Bucket                string
	RPM, TPM, MaxParallel int64
}

func rateLimitsOf(bucket string, l *pb.RateLimits) *RateLimits {
	if l == nil || (l.GetRpm() == 0 && l.GetTpm() == 0 && l.GetMaxParallel() == 0) {
		return nil
	}
	return &RateLimits{Bucket: bucket, RPM: l.GetRpm(), TPM: l.GetTpm(), MaxParallel: l.GetMaxParallel()}
}

// ValidateRateLimits checks that no limit is negative.
func ValidateRateLimits(l *pb.RateLimits) error {
	if l.GetRpm() < 0 || l.GetTpm() < 0 || l.GetMaxParallel() < 0 {
		return fmt.Errorf("rate limits must not be negative: %w", ErrInvalid)
	}
	return nil
}

// emptyToNil stores "no limits" as an unset field.
func emptyToNil(l *pb.RateLimits) *pb.RateLimits {
	if rateLimitsOf("", l) == nil {
		return nil
	}
	return l
}
