package proxy

import (
	"context"
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
