package routing

import (
	"fmt"
	"net/url"
	"strings"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Provider kinds a deployment can have.
const (
	ProviderOpenAI           = "openai"
	ProviderOpenAICompatible = "openai-compatible"
	// ProviderDemo answers inside the gateway, with no upstream: it makes
	// the first run work offline.
	ProviderDemo = "demo"
)

// OpenAIBaseURL is the default API root of the openai provider.
const OpenAIBaseURL = "https://api.openai.com/v1"

// Providers lists the provider kinds this build supports.
var Providers = []string{ProviderOpenAI, ProviderOpenAICompatible, ProviderDemo}

// Endpoint is an inbound API the gateway proxies.
type Endpoint uint8

// The proxied endpoints.
const (
	EndpointChat Endpoint = iota
	EndpointCompletions
	EndpointEmbeddings
)

// Path returns the endpoint's path below the API root.
func (e Endpoint) Path() string {
	switch e {
	case EndpointChat:
		return "/chat/completions"
	case EndpointCompletions:
		return "/completions"
	default:
		return "/embeddings"
	}
}

// Name returns a short label for metrics.
func (e Endpoint) Name() string {
	switch e {
	case EndpointChat:
		return "chat"
	case EndpointCompletions:
		return "completions"
	default:
		return "embeddings"
	}
}

// NormalizeDeployment fills defaults into d and checks that the gateway can
// call it. It is used by the admin API before a deployment is stored.
func NormalizeDeployment(d *pb.Deployment) error {
	if d.GetId() == "" {
		return fmt.Errorf("deployment id is empty")
	}
	switch d.GetProvider() {
	case ProviderOpenAI:
		if d.GetBaseUrl() == "" {
			d.BaseUrl = OpenAIBaseURL
		}
	case ProviderOpenAICompatible:
		if d.GetBaseUrl() == "" {
			return fmt.Errorf("provider %s needs a base URL (the API root including /v1)", d.GetProvider())
		}
	case ProviderDemo:
		return nil
	case "":
		return fmt.Errorf("provider is empty; one of %s", strings.Join(Providers, ", "))
	default:
		return fmt.Errorf("unknown provider %q; one of %s", d.GetProvider(), strings.Join(Providers, ", "))
	}
	u, err := url.Parse(d.GetBaseUrl())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q is not an http(s) URL", d.GetBaseUrl())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("base URL %q must not have a query or fragment", d.GetBaseUrl())
	}
	d.BaseUrl = strings.TrimRight(d.GetBaseUrl(), "/")
	if d.GetUpstreamModel() == "" {
		return fmt.Errorf("upstream model is empty")
	}
	return nil
}
