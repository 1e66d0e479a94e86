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
			in:      &pb.Deployment{Id: "a", Provider: "cohere", BaseUrl: "http://x/v1", UpstreamModel: "m"},
			wantErr: `unknown provider "cohere"`},
		{name: "anthropic default base URL",
			in:      &pb.Deployment{Id: "a", Provider: "anthropic", UpstreamModel: "claude-sonnet-4-5"},
			wantURL: routing.AnthropicBaseURL},
		{name: "gemini AI Studio",
			in:      &pb.Deployment{Id: "a", Provider: "gemini", UpstreamModel: "gemini-2.5-flash"},
			wantURL: routing.GeminiBaseURL},
		{name: "gemini Vertex",
			in: &pb.Deployment{Id: "a", Provider: "gemini", UpstreamModel: "gemini-2.5-flash",
				Options: map[string]string{"vertex_project": "p1", "vertex_location": "europe-west4"}},
			wantURL: "https://europe-west4-aiplatform.googleapis.com/v1"},
		{name: "bedrock region",
			in: &pb.Deployment{Id: "a", Provider: "bedrock", UpstreamModel: "anthropic.claude-3-haiku-20240307-v1:0",
				Options: map[string]string{"region": "eu-central-1"}},
			wantURL: "https://bedrock-runtime.eu-central-1.amazonaws.com"},
		{name: "bedrock without region",
			in:      &pb.Deployment{Id: "a", Provider: "bedrock", UpstreamModel: "m"},
			wantErr: "needs the AWS region"},
		{name: "azure needs its endpoint",
			in:      &pb.Deployment{Id: "a", Provider: "azure-openai", UpstreamModel: "my-deployment"},
			wantErr: "resource endpoint"},
		{name: "azure",
			in: &pb.Deployment{Id: "a", Provider: "azure-openai", BaseUrl: "https://r.openai.azure.com/", UpstreamModel: "gpt4o-prod",
				Options: map[string]string{"api_version": "2025-01-01-preview"}},
			wantURL: "https://r.openai.azure.com"},
		{name: "option of another provider",
			in: &pb.Deployment{Id: "a", Provider: "openai", UpstreamModel: "gpt-4o",
				Options: map[string]string{"region": "x"}},
			wantErr: `option "region" does not apply`},
		{name: "bedrock prompt caching is on or off",
			in: &pb.Deployment{Id: "a", Provider: "bedrock", UpstreamModel: "m",
				Options: map[string]string{"region": "us-east-1", "prompt_caching": "yes"}},
			wantErr: `option prompt_caching is on or off, not "yes"`},
		{name: "preset fills the base URL",
			in:      &pb.Deployment{Id: "a", Provider: "groq", UpstreamModel: "llama-3.3-70b-versatile"},
			wantURL: "https://api.groq.com/openai/v1"},
		{name: "preset with own base URL",
			in:      &pb.Deployment{Id: "a", Provider: "vllm", BaseUrl: "http://gpu-1:8000/v1", UpstreamModel: "qwen"},
			wantURL: "http://gpu-1:8000/v1"},
		{name: "unknown preset option",
			in: &pb.Deployment{Id: "a", Provider: "openai-compatible", BaseUrl: "http://x/v1", UpstreamModel: "m",
				Options: map[string]string{"preset": "nope"}},
			wantErr: `unknown preset "nope"`},
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
		{name: "userinfo",
			in:      &pb.Deployment{Id: "a", Provider: "openai-compatible", BaseUrl: "https://bob:hunter2secret@x/v1", UpstreamModel: "m"},
			wantErr: `base URL "https://REDACTED@x/v1" must not carry a user or password`},
		{name: "userinfo without password",
			in:      &pb.Deployment{Id: "a", Provider: "openai-compatible", BaseUrl: "https://sk-abc@x/v1", UpstreamModel: "m"},
			wantErr: "must not carry a user or password"},
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
				for _, secret := range []string{"hunter2", "sk-abc"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("the error shows the URL's secret: %v", err)
					}
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

// A preset is stored as openai-compatible and remembered in the options.
func TestPresetStoredAsCompatible(t *testing.T) {
	for _, name := range routing.PresetNames() {
		d := &pb.Deployment{Id: "a", Provider: name, UpstreamModel: "m"}
		if err := routing.NormalizeDeployment(d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p, ok := routing.PresetOf(d.GetOptions())
		if d.GetProvider() != routing.ProviderOpenAICompatible || !ok || p.Name != name || d.GetBaseUrl() != strings.TrimRight(p.BaseURL, "/") {
			t.Errorf("%s: stored as %s %s %v", name, d.GetProvider(), d.GetBaseUrl(), d.GetOptions())
		}
	}
}

func TestProvidersListed(t *testing.T) {
	for _, p := range []string{routing.ProviderOpenAI, routing.ProviderOpenAICompatible, routing.ProviderDemo} {
		if !slices.Contains(routing.Providers, p) {
			t.Errorf("Providers %v lacks %q", routing.Providers, p)
		}
	}
}
