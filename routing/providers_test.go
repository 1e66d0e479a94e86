package routing_test

import (
	"slices"
	"strings"
	"testing"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

func TestNormalizeDeployment(t *testing.T) {
	cases := []struct {
		name    string
		in      *pb.Deployment
		wantErr string // substring; "" means success
		wantURL string
	}{
		{name: "openai default base URL",
			in:      &pb.Deployment{Id: "a", Provider: "openai", UpstreamModel: "gpt-4o"},
			wantURL: routing.OpenAIBaseURL},
		{name: "openai custom base URL, trailing slashes trimmed",
			in:      &pb.Deployment{Id: "a", Provider: "openai", BaseUrl: "https://eu.api.openai.com/v1//", UpstreamModel: "gpt-4o"},
			wantURL: "https://eu.api.openai.com/v1"},
		{name: "compatible http",
			in:      &pb.Deployment{Id: "a", Provider: "openai-compatible", BaseUrl: "http://127.0.0.1:8000/v1/", UpstreamModel: "llama"},
			wantURL: "http://127.0.0.1:8000/v1"},
		{name: "compatible without path",
			in:      &pb.Deployment{Id: "a", Provider: "openai-compatible", BaseUrl: "http://vllm:8000", UpstreamModel: "llama"},
			wantURL: "http://vllm:8000"},
		{name: "demo needs nothing else",
			in: &pb.Deployment{Id: "d", Provider: "demo"}},
		{name: "empty id",
			in:      &pb.Deployment{Provider: "openai", UpstreamModel: "m"},
			wantErr: "id is empty"},
		{name: "empty provider",
			in:      &pb.Deployment{Id: "a", BaseUrl: "http://x/v1", UpstreamModel: "m"},
			wantErr: "provider is empty"},
		{name: "unknown provider",
			in:      &pb.Deployment{Id: "a", Provider: "anthropic", BaseUrl: "http://x/v1", UpstreamModel: "m"},
			wantErr: `unknown provider "anthropic"`},
		{name: "compatible without base URL",
			in:      &pb.Deployment{Id: "a", Provider: "openai-compatible", UpstreamModel: "m"},
			wantErr: "needs a base URL"},
		{name: "not http",
			in:      &pb.Deployment{Id: "a", Provider: "openai-compatible", BaseUrl: "ftp://x/v1", UpstreamModel: "m"},
			wantErr: "is not an http(s) URL"},
		{name: "no scheme",
			in:      &pb.Deployment{Id: "a", Provider: "openai-compatible", BaseUrl: "localhost:8000/v1", UpstreamModel: "m"},
			wantErr: "is not an http(s) URL"},
		{name: "no host",
			in:      &pb.Deployment{Id: "a", Provider: "openai-compatible", BaseUrl: "http:///v1", UpstreamModel: "m"},
			wantErr: "is not an http(s) URL"},
		{name: "unparsable",
			in:      &pb.Deployment{Id: "a", Provider: "openai-compatible", BaseUrl: "http://bad host/v1", UpstreamModel: "m"},
			wantErr: "is not an http(s) URL"},
		{name: "query",
			in:      &pb.Deployment{Id: "a", Provider: "openai-compatible", BaseUrl: "http://x/v1?api-version=1", UpstreamModel: "m"},
			wantErr: "must not have a query or fragment"},
		{name: "fragment",
			in:      &pb.Deployment{Id: "a", Provider: "openai-compatible", BaseUrl: "http://x/v1#frag", UpstreamModel: "m"},
			wantErr: "must not have a query or fragment"},
		{name: "empty upstream model",
			in:      &pb.Deployment{Id: "a", Provider: "openai", BaseUrl: "https://x/v1"},
			wantErr: "upstream model is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := routing.NormalizeDeployment(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if tc.in.GetBaseUrl() != tc.wantURL {
				t.Errorf("BaseUrl = %q, want %q", tc.in.GetBaseUrl(), tc.wantURL)
			}
		})
	}
}

func TestProvidersListed(t *testing.T) {
	for _, p := range []string{routing.ProviderOpenAI, routing.ProviderOpenAICompatible, routing.ProviderDemo} {
		if !slices.Contains(routing.Providers, p) {
			t.Errorf("Providers %v lacks %q", routing.Providers, p)
		}
	}
}
