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

// targets maps a deployment's key to its target. A sync.Map: a hit
// takes no lock, and a miss costs one entry, not a copy of the whole
// cache (a copy-on-write map cost a gateway that cycles through more
// deployments than the bound ~90 KB and ~0.2 ms per request).
// targetsLen counts its entries, roughly (a Clear may race an insert).
var (
	targets    sync.Map // string -> *target
	targetsLen atomic.Int64
)

// targetFor returns d's target (d not an Azure one, whose URLs depend on
// its options).
func targetFor(d *raftstore.Deployment) *target {
	if v, ok := targets.Load(d.Key); ok {
		if t := v.(*target); t.base == d.BaseURL && t.cred == d.Credential {
			return t
		}
	}
	t := newTarget(d)
	if _, replaced := targets.Swap(d.Key, t); !replaced && targetsLen.Add(1) > maxTargets {
		targets.Clear()
		targetsLen.Store(0)
	}
	return t
}

// newTarget makes d's target: its URLs parsed, its header value made.
func newTarget(d *raftstore.Deployment) *target {
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
	return t
}
