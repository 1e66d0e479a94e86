package raftstore

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// The handlers below never modify cur or anything reachable from it: they
// copy the maps they change and clone the messages they edit.

func timeOf(unixNanos int64) time.Time { return time.Unix(0, unixNanos).UTC() }

func (s *State) copyRoutes() *State {
	n := *s
	n.routeSrc = maps.Clone(s.routeSrc)
	return &n
}

func (s *State) copyCreds() *State {
	n := *s
	n.creds = maps.Clone(s.creds)
	return &n
}

// rebuildRoutes derives the data plane's route views from routeSrc and
// creds. Routes are few, so a full rebuild is cheap.
func (s *State) rebuildRoutes() {
	s.routes = make(map[string]*Route, len(s.routeSrc))
	s.routeNames = make([]string, 0, len(s.routeSrc))
	s.aliases = map[string]*Route{}
	s.wildcards = nil
	for name, r := range s.routeSrc {
		v := newRouteView(r, s.creds, s.sealer)
		s.routes[name] = v
		s.routeNames = append(s.routeNames, name)
		for _, a := range r.GetOptions().GetAliases() {
			s.aliases[a] = v
		}
		if v.Wildcard {
			s.wildcards = append(s.wildcards, v)
		}
	}
	sort.Strings(s.routeNames)
	sort.Slice(s.wildcards, func(i, j int) bool {
		a, b := s.wildcards[i].Name, s.wildcards[j].Name
		la, lb := len(a)-strings.Count(a, "*"), len(b)-strings.Count(b, "*")
		if la != lb {
			return la > lb
		}
		return a < b
	})
}

// setRouteOptions replaces a route's options after checking that its
// aliases name no other route or alias and its fallbacks are not itself.
func setRouteOptions(cur *State, c *pb.SetRouteOptionsCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	old, ok := cur.routeSrc[c.GetRoute()]
	if !ok {
		return nil, nil, fmt.Errorf("model %q: %w", c.GetRoute(), ErrNotFound)
	}
	o := c.GetOptions()
	if err := ValidateRouteOptions(c.GetRoute(), o); err != nil {
		return nil, nil, err
	}
	for _, a := range o.GetAliases() {
		if _, taken := cur.routeSrc[a]; taken {
			return nil, nil, fmt.Errorf("alias %q is the name of a model route: %w", a, ErrInvalid)
		}
		if r := cur.aliases[a]; r != nil && r.Name != c.GetRoute() {
			return nil, nil, fmt.Errorf("alias %q already belongs to model %q: %w", a, r.Name, ErrAlreadyExists)
		}
	}
	r := proto.Clone(old).(*pb.ModelRoute)
	r.Options = proto.Clone(o).(*pb.RouteOptions)
	if isEmptyOptions(r.Options) {
		r.Options = nil
	}
	r.UpdatedAt = ts
	next := cur.copyRoutes()
	next.routeSrc[r.GetName()] = r
	next.rebuildRoutes()
	return next, r, nil
}

func isEmptyOptions(o *pb.RouteOptions) bool {
	return o.GetStrategy() == "" && len(o.GetFallbacks()) == 0 && len(o.GetContextFallbacks()) == 0 &&
		len(o.GetAliases()) == 0 && o.GetMaxAttempts() == 0
}

// Routing strategies a route may name.
var Strategies = []string{"weighted", "least-inflight", "latency", "cost"}

// ValidateRouteOptions checks options for the route named route.
func ValidateRouteOptions(route string, o *pb.RouteOptions) error {
	if s := o.GetStrategy(); s != "" && !slices.Contains(Strategies, s) {
		return fmt.Errorf("unknown strategy %q; one of %s: %w", s, strings.Join(Strategies, ", "), ErrInvalid)
	}
	for _, list := range [][]string{o.GetFallbacks(), o.GetContextFallbacks()} {
		for _, f := range list {
			if f == "" || f == route {
				return fmt.Errorf("fallback %q: a fallback must name another model: %w", f, ErrInvalid)
			}
		}
	}
	for _, a := range o.GetAliases() {
		if a == "" || a == route || strings.ContainsAny(a, "*?") {
			return fmt.Errorf("alias %q: an alias is another plain name for the model: %w", a, ErrInvalid)
		}
	}
	if o.GetMaxAttempts() > 10 {
		return fmt.Errorf("max attempts %d: at most 10: %w", o.GetMaxAttempts(), ErrInvalid)
	}
	return nil
}

// putKey returns a copy of s with sk stored.
func (s *State) putKey(sk *pb.StoredKey) (*State, error) {
	var err error
	next := s.withKeys(func(kw *keyWriter) { _, err = kw.put(sk) })
	if err != nil {
		return nil, err
	}
	return next, nil
}

// keyOrErr returns the stored key with the given id, decoded: a copy the
// caller may edit.
func (s *State) keyOrErr(id string) (*pb.StoredKey, error) {
	sk := s.Key(id)
	if sk == nil {
		return nil, fmt.Errorf("key %q: %w", id, ErrNotFound)
	}
	return sk, nil
}

// putEdited stores sk, a key edited by a command, and answers it.
func putEdited(cur *State, sk *pb.StoredKey) (*State, proto.Message, error) {
	next, err := cur.putKey(sk)
	if err != nil {
		return nil, nil, err
	}
	return next, sk, nil
}

func createKey(cur *State, c *pb.CreateKeyCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	kw := cur.keyWriter()
	sk, err := addNewKey(cur, kw, c.GetKey(), ts)
	if err != nil {
		return nil, nil, err
	}
	next := *cur
	kw.commit(&next)
	return &next, sk, nil
}

// addNewKey checks a key to create against cur and the keys kw added
// already, and adds a copy of it, stamped with ts, to kw.
func addNewKey(cur *State, kw *keyWriter, sk *pb.StoredKey, ts *timestamppb.Timestamp) (*pb.StoredKey, error) {
	id := sk.GetKey().GetId()
	if id == "" {
		return nil, fmt.Errorf("key id is empty: %w", ErrInvalid)
	}
	h, err := hash32(sk.GetSecretHash())
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", id, err)
	}
	if kw.get(id) != nil {
		return nil, fmt.Errorf("key %q: %w", id, ErrAlreadyExists)
	}
	if kw.byHash.get(h) != nil {
		return nil, fmt.Errorf("key %q: secret collides with another key: %w", id, ErrAlreadyExists)
	}
	if t := sk.GetKey().GetTeamId(); t != "" && cur.team(t) == nil {
		return nil, fmt.Errorf("team %q does not exist: %w", t, ErrFailedPrecondition)
	}
	if err := ValidateBudget(sk.GetKey().GetBudget()); err != nil {
		return nil, err
	}
	if err := ValidateRateLimits(sk.GetKey().GetLimits()); err != nil {
		return nil, err
	}
	sk = proto.Clone(sk).(*pb.StoredKey)
	sk.Key.Limits = emptyToNil(sk.Key.Limits)
	sk.Key.CreatedAt, sk.Key.UpdatedAt, sk.Key.RevokedAt = ts, ts, nil
	if _, err := kw.put(sk); err != nil {
		return nil, err
	}
	return sk, nil
}

func updateKey(cur *State, u *pb.UpdateKeyRequest, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	sk, err := cur.keyOrErr(u.GetId())
	if err != nil {
		return nil, nil, err
	}
	k := sk.Key
	if u.Name != nil {
		k.Name = u.GetName()
	}
	if u.Models != nil {
		k.Models = append([]string(nil), u.Models.GetValues()...)
	}
	if u.GetClearExpiresAt() {
		k.ExpiresAt = nil
	} else if u.ExpiresAt != nil {
		k.ExpiresAt = u.GetExpiresAt()
	}
	mergeMetadata(&k.Metadata, u.GetMetadata())
	if u.TeamId != nil {
		if t := u.GetTeamId(); t != "" && cur.team(t) == nil {
			return nil, nil, fmt.Errorf("team %q does not exist: %w", t, ErrFailedPrecondition)
		}
		k.TeamId = u.GetTeamId()
	}
	if u.GetClearBudget() {
		k.Budget = nil
	} else if u.Budget != nil {
		if err := ValidateBudget(u.GetBudget()); err != nil {
			return nil, nil, err
		}
		k.Budget = u.GetBudget()
	}
	if u.Limits != nil {
		if err := ValidateRateLimits(u.GetLimits()); err != nil {
			return nil, nil, err
		}
		k.Limits = emptyToNil(u.GetLimits())
	}
	k.UpdatedAt = ts
	return putEdited(cur, sk)
}

func revokeKey(cur *State, id string, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	old, err := cur.keyOrErr(id)
	if err != nil {
		return nil, nil, err
	}
	if old.GetKey().GetRevokedAt() != nil {
		return nil, old, nil // already revoked: nothing changes
	}
	sk := old // decoded for this command alone
	sk.Key.RevokedAt, sk.Key.UpdatedAt = ts, ts
	return putEdited(cur, sk)
}

func rotateKey(cur *State, c *pb.RotateKeyCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	old, err := cur.keyOrErr(c.GetId())
	if err != nil {
		return nil, nil, err
	}
	if old.GetKey().GetRevokedAt() != nil {
		return nil, nil, fmt.Errorf("key %q is revoked: %w", c.GetId(), ErrFailedPrecondition)
	}
	h, err := hash32(c.GetSecretHash())
	if err != nil {
		return nil, nil, fmt.Errorf("key %q: %w", c.GetId(), err)
	}
	if cur.KeyByHash(h) != nil {
		return nil, nil, fmt.Errorf("key %q: new secret collides with a key: %w", c.GetId(), ErrAlreadyExists)
	}
	sk := old // decoded for this command alone
	sk.SecretHash = append([]byte(nil), h[:]...)
	sk.Key.SecretPrefix = c.GetSecretPrefix()
	sk.Key.UpdatedAt = ts
	return putEdited(cur, sk)
}

func validateDeployment(d *pb.Deployment) error {
	if d.GetId() == "" {
		return fmt.Errorf("deployment id is empty: %w", ErrInvalid)
	}
	if d.GetProvider() == "" {
		return fmt.Errorf("deployment %q: provider is empty: %w", d.GetId(), ErrInvalid)
	}
	return ValidateRateLimits(d.GetLimits())
}

func addDeployment(cur *State, c *pb.AddDeploymentCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	name, d := c.GetRoute(), c.GetDeployment()
	if name == "" {
		return nil, nil, fmt.Errorf("model name is empty: %w", ErrInvalid)
	}
	if err := validateDeployment(d); err != nil {
		return nil, nil, err
	}
	var r *pb.ModelRoute
	if old, ok := cur.routeSrc[name]; ok {
		for _, od := range old.GetDeployments() {
			if od.GetId() == d.GetId() {
				return nil, nil, fmt.Errorf("model %q already has deployment %q: %w", name, d.GetId(), ErrAlreadyExists)
			}
		}
		r = proto.Clone(old).(*pb.ModelRoute)
	} else {
		r = &pb.ModelRoute{Name: name, CreatedAt: ts}
	}
	r.Deployments = append(r.Deployments, proto.Clone(d).(*pb.Deployment))
	r.UpdatedAt = ts
	next := cur.copyRoutes()
	next.routeSrc[name] = r
	next.rebuildRoutes()
	return next, r, nil
}

func findDeployment(cur *State, route, id string) (*pb.ModelRoute, int, error) {
	r, ok := cur.routeSrc[route]
	if !ok {
		return nil, 0, fmt.Errorf("model %q: %w", route, ErrNotFound)
	}
	for i, d := range r.GetDeployments() {
		if d.GetId() == id {
			return r, i, nil
		}
	}
	return nil, 0, fmt.Errorf("model %q has no deployment %q: %w", route, id, ErrNotFound)
}

func updateDeployment(cur *State, u *pb.UpdateDeploymentRequest, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	old, i, err := findDeployment(cur, u.GetModel(), u.GetDeploymentId())
	if err != nil {
		return nil, nil, err
	}
	r := proto.Clone(old).(*pb.ModelRoute)
	d := r.Deployments[i]
	if u.Provider != nil {
		d.Provider = u.GetProvider()
	}
	if u.BaseUrl != nil {
		d.BaseUrl = u.GetBaseUrl()
	}
	if u.UpstreamModel != nil {
		d.UpstreamModel = u.GetUpstreamModel()
	}
	if u.Credential != nil {
		d.Credential = u.GetCredential()
	}
	if u.Weight != nil {
		d.Weight = u.GetWeight()
	}
	if u.Priority != nil {
		d.Priority = u.GetPriority()
	}
	if u.TimeoutMs != nil {
		d.TimeoutMs = u.GetTimeoutMs()
	}
	if u.Limits != nil {
		d.Limits = emptyToNil(u.GetLimits())
	}
	if u.GetSetOptions() {
		d.Options = maps.Clone(u.GetOptions())
	}
	if u.FirstTokenTimeoutMs != nil {
		d.FirstTokenTimeoutMs = u.GetFirstTokenTimeoutMs()
	}
	if err := validateDeployment(d); err != nil {
		return nil, nil, err
	}
	r.UpdatedAt = ts
	next := cur.copyRoutes()
	next.routeSrc[r.GetName()] = r
	next.rebuildRoutes()
	return next, r, nil
}

func removeDeployment(cur *State, c *pb.RemoveDeploymentCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	old, i, err := findDeployment(cur, c.GetRoute(), c.GetDeploymentId())
	if err != nil {
		return nil, nil, err
	}
	next := cur.copyRoutes()
	if len(old.GetDeployments()) == 1 {
		delete(next.routeSrc, old.GetName())
		next.rebuildRoutes()
		return next, nil, nil
	}
	r := proto.Clone(old).(*pb.ModelRoute)
	r.Deployments = append(r.Deployments[:i], r.Deployments[i+1:]...)
	r.UpdatedAt = ts
	next.routeSrc[r.GetName()] = r
	next.rebuildRoutes()
	return next, r, nil
}

func deleteRoute(cur *State, name string) (*State, error) {
	if _, ok := cur.routeSrc[name]; !ok {
		return nil, fmt.Errorf("model %q: %w", name, ErrNotFound)
	}
	next := cur.copyRoutes()
	delete(next.routeSrc, name)
	next.rebuildRoutes()
	return next, nil
}

func setCredential(cur *State, c *pb.SetCredentialCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	if c.GetName() == "" {
		return nil, nil, fmt.Errorf("credential name is empty: %w", ErrInvalid)
	}
	if c.GetValue() == "" {
		return nil, nil, fmt.Errorf("credential %q: value is empty: %w", c.GetName(), ErrInvalid)
	}
	sc := &pb.StoredCredential{Name: c.GetName(), Value: c.GetValue(), UpdatedAt: ts}
	if of := c.GetResealOf(); of != "" {
		old, ok := cur.creds[c.GetName()]
		if !ok || old.GetValue() != of {
			// Set again or deleted since the reseal was proposed: the
			// newer change stands.
			return nil, nil, fmt.Errorf("credential %q changed before it was resealed: %w", c.GetName(), ErrFailedPrecondition)
		}
		sc.UpdatedAt = old.GetUpdatedAt()
	}
	next := cur.copyCreds()
	next.creds[sc.Name] = sc
	next.rebuildRoutes()
	return next, sc, nil
}

func deleteCredential(cur *State, name string) (*State, error) {
	if _, ok := cur.creds[name]; !ok {
		return nil, fmt.Errorf("credential %q: %w", name, ErrNotFound)
	}
	for _, rn := range cur.routeNames {
		for _, d := range cur.routeSrc[rn].GetDeployments() {
			if d.GetCredential() == name {
				return nil, fmt.Errorf("credential %q is used by deployment %q of model %q: %w",
					name, d.GetId(), rn, ErrFailedPrecondition)
			}
		}
	}
	next := cur.copyCreds()
	delete(next.creds, name)
	next.rebuildRoutes()
	return next, nil
}

func addAdminToken(cur *State, hash []byte) (*State, error) {
	h, err := hash32(hash)
	if err != nil {
		return nil, fmt.Errorf("admin token: %w", err)
	}
	if _, ok := cur.adminTokens[h]; ok {
		return nil, nil
	}
	next := *cur
	next.adminTokens = maps.Clone(cur.adminTokens)
	next.adminTokens[h] = struct{}{}
	return &next, nil
}

// restoreState replaces the whole state with snap, keeping the admin tokens
// and users already registered so that whoever restores keeps access, the
// console sessions ended (logged out), and the audit log as it is.
func restoreState(cur *State, snap *pb.Snapshot) (*State, error) {
	if snap == nil {
		return nil, fmt.Errorf("restore: no snapshot: %w", ErrInvalid)
	}
	next, err := stateFromSnapshot(snap, cur.sealer, cur.retention)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	for h := range cur.adminTokens {
		next.adminTokens[h] = struct{}{}
	}
	if cur.clusterSecret != "" { // the running cluster's own secret stays
		next.clusterSecret = cur.clusterSecret
	}
	mergeUsers(next, cur)
	mergeEndedSessions(next, cur)
	next.audit = cur.audit // no restore edits or deletes the audit log

	return next, nil
}
