package raftstore

import (
	"crypto/sha256"
	"sort"
	"strconv"
	"strings"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// State is an immutable view of the replicated control state at one applied
// Raft index. The FSM builds a new State after every apply and publishes it
// through an atomic pointer, so the data plane reads it without locks. Nothing
// reachable from a State may be modified once it is published.
type State struct {
	// Index is the Raft log index this state reflects.
	Index uint64

	keys          ptree[*Key] // by key id (key.go)
	keysByHash    hashTrie    // by SHA-256 of the secret
	keysByCreated ptree[*Key] // by creation time, then id
	keysByTeam    ptree[*Key] // by team, then id; the keys that have one
	routeSrc      map[string]*pb.ModelRoute
	routes        map[string]*Route // derived from routeSrc and creds
	routeNames    []string          // sorted
	aliases       map[string]*Route // alias → route
	wildcards     []*Route          // most specific first
	creds         map[string]*pb.StoredCredential
	mcpServers    map[string]*pb.McpServer // upstream MCP servers (raftstore/mcp.go)
	adminTokens   map[[32]byte]struct{}

	teams         ptree[named[*teamEntry]] // by team id
	rollups       ptree[*pb.SpendRollup]   // hourly, by hour, key, team, model
	daily         ptree[*pb.SpendRollup]   // daily (HourUnix: the day's start), same order
	retention     Retention
	periods       ptree[periodItem]         // by budget, start
	leasesByNode  ptree[leaseItem]          // the periods a node has a lease entry in
	nodeSeqs      map[string]uint64         // last spend report per node
	requests      ptree[named[*appliedReq]] // by request id
	requestsByAge ptree[ageItem]            // by time applied
	clusterSecret string
	sealer        *Sealer                // opens sealed credentials; nil when none are
	users         users                  // admin users (users.go)
	audit         ptree[*pb.AuditRecord] // by index (audit.go)
	endedSessions ptree[endedSession]    // logged-out console sessions (consolesessions.go)
}

// Route is the data plane's view of a model route: its deployments with
// credentials resolved.
type Route struct {
	Name        string
	Created     int64 // Unix seconds
	Deployments []*Deployment
	// Wildcard is set when Name contains '*'.
	Wildcard bool
	// Strategy picks among deployments of one priority: "weighted" (also
	// when empty), "least-inflight", "latency" or "cost".
	Strategy string
	// Fallbacks and ContextFallbacks name routes tried after this one (see
	// pb.RouteOptions).
	Fallbacks        []string
	ContextFallbacks []string
	// MaxAttempts bounds the attempts of one request on this route; zero
	// uses the node's default.
	MaxAttempts uint32
}

// Deployment is one upstream of a route, ready to be called.
type Deployment struct {
	ID            string
	Provider      string
	BaseURL       string // without a trailing slash
	UpstreamModel string
	Weight        uint32 // at least 1
	Priority      uint32
	TimeoutMillis uint32
	// Credential is the resolved secret; empty when the deployment has none
	// or names a credential that does not exist (CredentialMissing is set)
	// or does not open on this node (CredentialError says why).
	Credential        string
	CredentialName    string
	CredentialMissing bool
	CredentialError   string
	// Price overrides the built-in price; nil for none.
	Price *pb.Price
	// Limits protect the upstream; nil for none.
	Limits *RateLimits
	// Options are provider-specific settings (see pb.Deployment.options);
	// never modified once published.
	Options map[string]string
	// FirstTokenTimeoutMillis bounds the wait for a stream's first event;
	// zero for none.
	FirstTokenTimeoutMillis uint32
	// Key identifies the deployment across the cluster's routes
	// ("route/id"), for health and latency tracking.
	Key string
}

func emptyState() *State {
	return &State{
		keys:          newPtree(keyIDLess),
		keysByCreated: newPtree(createdLess),
		keysByTeam:    newPtree(teamKeyLess),
		routeSrc:      map[string]*pb.ModelRoute{},
		routes:        map[string]*Route{},
		creds:         map[string]*pb.StoredCredential{},
		adminTokens:   map[[32]byte]struct{}{},
		teams:         newNamedTree[*teamEntry](),
		rollups:       newPtree(rollupLess),
		daily:         newPtree(rollupLess),
		retention:     DefaultRetention,
		periods:       newPtree(periodLess),
		leasesByNode:  newPtree(leaseLess),
		nodeSeqs:      map[string]uint64{},
		requests:      newSmallPtree(namedLess[*appliedReq]),
		requestsByAge: newSmallPtree(ageLess),
		audit:         newSmallPtree(auditLess),
		endedSessions: newEndedSessions(),
	}
}

// HashSecret returns the SHA-256 of a key secret or admin token, the only
// form in which either is stored.
func HashSecret(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// KeyByHash returns the key whose secret hashes to h, or nil.
func (s *State) KeyByHash(h [32]byte) *Key {
	return s.keysByHash.get(h)
}

// KeyByID returns the key with the given id, or nil.
func (s *State) KeyByID(id string) *Key {
	k, _ := s.keys.get(&Key{ID: id})
	return k
}

// Key returns the stored key with the given id, or nil: decoded on every
// call (an admin read), so the caller may modify it.
func (s *State) Key(id string) *pb.StoredKey {
	if k := s.KeyByID(id); k != nil {
		return k.Stored()
	}
	return nil
}

// KeyCount returns how many keys are stored (revoked ones too).
func (s *State) KeyCount() int { return s.keys.Len() }

// Keys returns every stored key sorted by creation time, then id.
func (s *State) Keys() []*pb.StoredKey {
	out := make([]*pb.StoredKey, 0, s.keys.Len())
	s.keysByCreated.ascend(func(k *Key) bool {
		out = append(out, k.Stored())
		return true
	})
	return out
}

// KeysPage returns up to limit keys in the order of Keys, starting after
// the key with id after ("" for the first page). A page that ends early is
// the last one. An after that names no key starts at the beginning.
func (s *State) KeysPage(after string, limit int) []*pb.StoredKey {
	if limit <= 0 {
		return nil
	}
	out := make([]*pb.StoredKey, 0, min(limit, s.keys.Len()))
	add := func(k *Key) bool {
		if k.ID != after {
			out = append(out, k.Stored())
		}
		return len(out) < limit
	}
	if k := s.KeyByID(after); k != nil {
		s.keysByCreated.ascendFrom(k, add)
	} else {
		s.keysByCreated.ascend(add)
	}
	return out
}

// AscendKeys calls fn for the keys whose id is not before from, in id
// order, until it returns false; with team, for that team's keys only
// (through the team index). Nothing is decoded or copied: fn decodes
// (Key.Stored) the keys it answers with.
func (s *State) AscendKeys(team, from string, fn func(*Key) bool) {
	if team == "" {
		s.keys.ascendFrom(&Key{ID: from}, fn)
		return
	}
	s.keysByTeam.ascendFrom(&Key{TeamID: team, ID: from}, func(k *Key) bool {
		return k.TeamID == team && fn(k)
	})
}

// Route returns the route named name, or nil.
func (s *State) Route(name string) *Route { return s.routes[name] }

// Resolve returns the route that serves the model name a client asked
// for: the route of that exact name, else the route with that alias, else
// the most specific wildcard route that matches it (the one with the most
// non-'*' characters; ties go to the lexically smaller name). Nil if none.
func (s *State) Resolve(name string) *Route {
	if r := s.routes[name]; r != nil {
		return r
	}
	if r := s.aliases[name]; r != nil {
		return r
	}
	for _, r := range s.wildcards {
		if MatchPattern(r.Name, name) {
			return r
		}
	}
	return nil
}

// RouteNames returns the names of all routes, sorted.
func (s *State) RouteNames() []string { return s.routeNames }

// RouteConfig returns the stored definition of a route, or nil. The result
// must not be modified.
func (s *State) RouteConfig(name string) *pb.ModelRoute { return s.routeSrc[name] }

// RouteConfigs returns the stored definitions of all routes, sorted by name.
func (s *State) RouteConfigs() []*pb.ModelRoute {
	out := make([]*pb.ModelRoute, 0, len(s.routeNames))
	for _, n := range s.routeNames {
		out = append(out, s.routeSrc[n])
	}
	return out
}

// Credentials returns every stored credential sorted by name. The values
// are secrets: callers outside the data plane must not expose them.
func (s *State) Credentials() []*pb.StoredCredential {
	out := make([]*pb.StoredCredential, 0, len(s.creds))
	for _, c := range s.creds {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

// Credential returns the stored credential called name, or nil.
func (s *State) Credential(name string) *pb.StoredCredential { return s.creds[name] }

// HasAdminToken reports whether an admin token with hash h is registered.
func (s *State) HasAdminToken(h [32]byte) bool {
	_, ok := s.adminTokens[h]
	return ok
}

// AdminTokenCount returns how many admin tokens are registered.
func (s *State) AdminTokenCount() int { return len(s.adminTokens) }

// MatchPattern reports whether name matches pattern, where '*' matches any
// run of characters (also none) and every other character matches itself.
func MatchPattern(pattern, name string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == name
	}
	// The text before the first '*' is a prefix of name.
	if !strings.HasPrefix(name, pattern[:star]) {
		return false
	}
	name, pattern = name[star:], pattern[star+1:]
	// Each text between two '*'s matches at its leftmost place in what is
	// left of name (taking the leftmost never loses a match), and the text
	// after the last '*' is a suffix of the rest. Linear in len(name) per
	// segment, so a long client-supplied name cannot blow up.
	for {
		star = strings.IndexByte(pattern, '*')
		if star < 0 {
			return strings.HasSuffix(name, pattern)
		}
		i := strings.Index(name, pattern[:star])
		if i < 0 {
			return false
		}
		name, pattern = name[i+star:], pattern[star+1:]
	}
}

func newRouteView(r *pb.ModelRoute, creds map[string]*pb.StoredCredential, sealer *Sealer) *Route {
	o := r.GetOptions()
	v := &Route{Name: r.GetName(), Created: r.GetCreatedAt().GetSeconds(),
		Wildcard: strings.IndexByte(r.GetName(), '*') >= 0, Strategy: o.GetStrategy(),
		Fallbacks: o.GetFallbacks(), ContextFallbacks: o.GetContextFallbacks(), MaxAttempts: o.GetMaxAttempts()}
	for _, d := range r.GetDeployments() {
		dv := &Deployment{
			Key:                     r.GetName() + "/" + d.GetId(),
			Options:                 d.GetOptions(),
			FirstTokenTimeoutMillis: d.GetFirstTokenTimeoutMs(),
			ID:                      d.GetId(),
			Provider:                d.GetProvider(),
			BaseURL:                 strings.TrimRight(d.GetBaseUrl(), "/"),
			UpstreamModel:           d.GetUpstreamModel(),
			Weight:                  max(d.GetWeight(), 1),
			Priority:                d.GetPriority(),
			TimeoutMillis:           d.GetTimeoutMs(),
			CredentialName:          d.GetCredential(),
			Price:                   d.GetPrice(),
			Limits:                  rateLimitsOf("dep:"+r.GetName()+"/"+d.GetId(), d.GetLimits()),
		}
		if n := d.GetCredential(); n != "" {
			if c, ok := creds[n]; !ok {
				dv.CredentialMissing = true
			} else if v, err := sealer.Open(n, c.GetValue()); err != nil {
				dv.CredentialError = "credential " + strconv.Quote(n) + ": " + err.Error()
			} else {
				dv.Credential = v
			}
		}
		v.Deployments = append(v.Deployments, dv)
	}
	return v
}

// Snapshot returns the whole state as a Snapshot message (what a Raft
// snapshot holds and a restore reads).
func (s *State) Snapshot() *pb.Snapshot { return snapshotOf(s) }
