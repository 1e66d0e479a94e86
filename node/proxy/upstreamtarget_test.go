package proxy

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

func upstreamReq(t *testing.T, d *raftstore.Deployment, ep routing.Endpoint) (url, auth string, err error) {
	t.Helper()
	body := getBuf()
	body.b = append(body.b, `{}`...)
	req, err := newUpstreamRequest(context.Background(), d, ep, body)
	if err != nil {
		return "", "", err
	}
	defer req.Body.Close()
	if req.Host != req.URL.Host {
		t.Errorf("Host %q, URL's %q", req.Host, req.URL.Host)
	}
	return req.URL.String(), req.Header.Get("Authorization"), nil
}

// A deployment's upstream URL and credential, made once, follow the
// deployment when an admin changes them (same key, new base URL or
// credential), and each request gets a URL of its own.
func TestUpstreamRequestFollowsAChangedDeployment(t *testing.T) {
	d := &raftstore.Deployment{Key: "r/d", Provider: routing.ProviderOpenAI, BaseURL: "http://127.0.0.1:1/v1", Credential: "sk-a"}
	for _, tc := range []struct {
		base, cred, url, auth string
	}{
		{"http://127.0.0.1:1/v1", "sk-a", "http://127.0.0.1:1/v1/chat/completions", "Bearer sk-a"},
		{"http://127.0.0.1:1/v1", "sk-b", "http://127.0.0.1:1/v1/chat/completions", "Bearer sk-b"},
		{"http://127.0.0.1:2/v2", "", "http://127.0.0.1:2/v2/chat/completions", ""},
		{"http://127.0.0.1:/v3", "sk-c", "http://127.0.0.1/v3/chat/completions", "Bearer sk-c"}, // empty port dropped, as http.NewRequest does
	} {
		d2 := *d
		d2.BaseURL, d2.Credential = tc.base, tc.cred
		for range 2 {
			u, auth, err := upstreamReq(t, &d2, routing.EndpointChat)
			if err != nil || u != tc.url || auth != tc.auth {
				t.Errorf("%s %q: %s %q %v, want %s %q", tc.base, tc.cred, u, auth, err, tc.url, tc.auth)
			}
		}
	}
	body := getBuf()
	a, _ := newUpstreamRequest(context.Background(), d, routing.EndpointEmbeddings, body)
	b, _ := newUpstreamRequest(context.Background(), d, routing.EndpointEmbeddings, getBuf())
	defer a.Body.Close()
	defer b.Body.Close()
	if a.URL == b.URL || a.URL.Path != "/v1/embeddings" {
		t.Errorf("two requests share URL %p (%s)", a.URL, a.URL)
	}
}

// A base URL that does not parse fails every request to it, as it did
// when each request parsed its own.
func TestUpstreamRequestToABadURLFails(t *testing.T) {
	d := &raftstore.Deployment{Key: "r/bad", Provider: routing.ProviderOpenAI, BaseURL: "http://bad host/v1"}
	for range 2 {
		if _, _, err := upstreamReq(t, d, routing.EndpointChat); err == nil || !strings.Contains(err.Error(), "invalid character") {
			t.Errorf("err %v", err)
		}
	}
}

// keyedDeployment is an OpenAI deployment under key i.
func keyedDeployment(prefix string, i int) *raftstore.Deployment {
	return &raftstore.Deployment{Key: prefix + strconv.Itoa(i), Provider: routing.ProviderOpenAI,
		BaseURL: "http://127.0.0.1:1/v1", Credential: "sk-x"}
}

// A deployment the cache has not seen costs its own entry, not a copy of
// the cache: a gateway with thousands of deployments (or more than the
// bound, cycling) pays a few KB per new one, not the whole cache's size.
func TestUpstreamTargetOfANewDeploymentDoesNotCopyTheCache(t *testing.T) {
	for i := range 3000 {
		targetFor(keyedDeployment("full/", i))
	}
	const misses = 500
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range misses {
		targetFor(keyedDeployment("new/", i))
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / misses; per > 16<<10 {
		t.Errorf("a new deployment allocated %d bytes with 3,000 cached (want at most 16 KiB: its own entry)", per)
	}
}

// The cache holds at most maxTargets deployments (and a few that raced a
// reset), however many pass through it.
func TestUpstreamTargetCacheIsBounded(t *testing.T) {
	for i := range 2*maxTargets + 10 {
		targetFor(keyedDeployment("bound/", i))
	}
	n := 0
	targets.Range(func(any, any) bool { n++; return true })
	if n > maxTargets {
		t.Errorf("%d deployments cached, bound %d", n, maxTargets)
	}
	if d := keyedDeployment("bound/", 1); targetFor(d).auth[0] != "Bearer sk-x" {
		t.Error("a deployment dropped at a reset is not made again")
	}
}

// BenchmarkNewUpstreamRequestManyDeployments: upstream requests to
// deployments taken in turn, 100 of them (all cached after the first
// round) or 5,000 (more than the cache holds: some always new).
func BenchmarkNewUpstreamRequestManyDeployments(b *testing.B) {
	for _, n := range []int{100, 5000} {
		ds := make([]*raftstore.Deployment, n)
		for i := range ds {
			ds[i] = keyedDeployment("bench"+strconv.Itoa(n)+"/", i)
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				body := getBuf()
				body.b = append(body.b, `{"model":"m"}`...)
				req, err := newUpstreamRequest(context.Background(), ds[i%n], routing.EndpointChat, body)
				if err != nil {
					b.Fatal(err)
				}
				_ = req.Body.Close()
				i++
			}
		})
	}
}
