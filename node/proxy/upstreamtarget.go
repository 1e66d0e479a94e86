package proxy

import (
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// An OpenAI-wire deployment's upstream URLs (one per endpoint) and its
// credential's header value are made once per deployment, not per
// request: a request copies its URL from here (no parsing) and shares the
// header value (never changed once made).

// target is what newUpstreamRequest needs of a deployment, made from its
// base URL and credential (kept to tell when they change).
type target struct {
	base, cred string
	urls       [routing.EndpointGemini + 1]*url.URL // nil: that URL does not parse
	errs       [routing.EndpointGemini + 1]error
	auth       []string // "Bearer <credential>"; nil without one
}

// maxTargets bounds the cache: past it, it starts again empty.
const maxTargets = 4096

// targets maps a deployment's key to its target: read without a lock (a
// map never changed once published), written by copying.
var (
	targets   atomic.Pointer[map[string]*target]
	targetsMu sync.Mutex
)

// targetFor returns d's target (d not an Azure one, whose URLs depend on
// its options).
func targetFor(d *raftstore.Deployment) *target {
	if m := targets.Load(); m != nil {
		if t := (*m)[d.Key]; t != nil && t.base == d.BaseURL && t.cred == d.Credential {
			return t
		}
	}
	t := &target{base: d.BaseURL, cred: d.Credential}
	for ep := range t.urls {
		u, err := url.Parse(d.BaseURL + routing.Endpoint(ep).Path())
		if err == nil {
			u.Host = strings.TrimSuffix(u.Host, ":") // as http.NewRequest does
		}
		t.urls[ep], t.errs[ep] = u, err
	}
	if d.Credential != "" {
		t.auth = []string{"Bearer " + d.Credential}
	}
	targetsMu.Lock()
	defer targetsMu.Unlock()
	next := map[string]*target{}
	if m := targets.Load(); m != nil && len(*m) < maxTargets {
		next = make(map[string]*target, len(*m)+1)
		for k, v := range *m {
			next[k] = v
		}
	}
	next[d.Key] = t
	targets.Store(&next)
	return t
}
