package routing

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Provider kinds a deployment can have.
const (
	ProviderOpenAI           = "openai"
	ProviderOpenAICompatible = "openai-compatible"
	ProviderAzureOpenAI      = "azure-openai"
	ProviderAnthropic        = "anthropic"
	ProviderGemini           = "gemini"
	ProviderBedrock          = "bedrock"
	// ProviderDemo answers inside the gateway, with no upstream: it makes
	// the first run work offline.
	ProviderDemo = "demo"
)

// Default API roots.
const (
	OpenAIBaseURL    = "https://api.openai.com/v1"
	AnthropicBaseURL = "https://api.anthropic.com/v1"
	GeminiBaseURL    = "https://generativelanguage.googleapis.com/v1beta"
	// AzureAPIVersion is the api-version an azure-openai deployment uses
	// unless its options name another.
	AzureAPIVersion = "2024-10-21"
)

// Providers lists the provider kinds this build supports.
var Providers = []string{ProviderOpenAI, ProviderOpenAICompatible, ProviderAzureOpenAI, ProviderAnthropic,
	ProviderGemini, ProviderBedrock, ProviderDemo}

// Preset is an OpenAI-compatible server with a known API root and quirks.
type Preset struct {
	Name    string
	BaseURL string
	// NoStreamOptions: the server refuses or ignores stream_options, so the
	// gateway does not add include_usage (these servers report usage in the
	// last chunk on their own).
	NoStreamOptions bool
	// NoEmbeddings: the server has no /embeddings.
	NoEmbeddings bool
}

// Presets are the OpenAI-compatible servers a deployment may name as its
// provider; the deployment is stored as openai-compatible with the preset's
// base URL (unless one is given) and options["preset"].
var Presets = map[string]Preset{
	"vllm":       {Name: "vllm", BaseURL: "http://127.0.0.1:8000/v1"},
	"ollama":     {Name: "ollama", BaseURL: "http://127.0.0.1:11434/v1"},
	"lmstudio":   {Name: "lmstudio", BaseURL: "http://127.0.0.1:1234/v1"},
	"groq":       {Name: "groq", BaseURL: "https://api.groq.com/openai/v1"},
	"mistral":    {Name: "mistral", BaseURL: "https://api.mistral.ai/v1", NoStreamOptions: true},
	"deepseek":   {Name: "deepseek", BaseURL: "https://api.deepseek.com/v1", NoEmbeddings: true},
	"together":   {Name: "together", BaseURL: "https://api.together.xyz/v1"},
	"fireworks":  {Name: "fireworks", BaseURL: "https://api.fireworks.ai/inference/v1"},
	"openrouter": {Name: "openrouter", BaseURL: "https://openrouter.ai/api/v1"},
	"xai":        {Name: "xai", BaseURL: "https://api.x.ai/v1", NoEmbeddings: true},
	"perplexity": {Name: "perplexity", BaseURL: "https://api.perplexity.ai", NoStreamOptions: true, NoEmbeddings: true},
}

// PresetNames returns the preset names, sorted.
func PresetNames() []string { return slices.Sorted(maps.Keys(Presets)) }

// PresetOf returns the preset a deployment was made from, if any.
func PresetOf(options map[string]string) (Preset, bool) {
	p, ok := Presets[options["preset"]]
	return p, ok
}

// OpenAIWire reports whether a provider kind speaks the OpenAI wire format
// (the gateway's fast path: requests pass through with the model renamed).
func OpenAIWire(kind string) bool {
	return kind == ProviderOpenAI || kind == ProviderOpenAICompatible || kind == ProviderAzureOpenAI
}

// SpeaksResponses reports whether a deployment takes OpenAI's Responses
// API itself, so that /v1/responses passes through to it untouched:
// openai and azure-openai deployments do unless their option responses is
// off; openai-compatible ones (vLLM, ...) only with responses=on.
func SpeaksResponses(kind string, options map[string]string) bool {
	switch kind {
	case ProviderOpenAI, ProviderAzureOpenAI:
		return options["responses"] != "off"
	case ProviderOpenAICompatible:
		return options["responses"] == "on"
	}
	return false
}

// Endpoint is an inbound API the gateway proxies.
type Endpoint uint8

// The proxied endpoints.
const (
	EndpointChat Endpoint = iota
	EndpointCompletions
	EndpointEmbeddings
	EndpointMessages  // Anthropic Messages
	EndpointResponses // OpenAI Responses
	EndpointGemini    // Google's Gemini API: generateContent, streamGenerateContent
)

// Path returns the endpoint's path below the API root of an OpenAI-wire
// upstream.
func (e Endpoint) Path() string {
	switch e {
	case EndpointChat:
		return "/chat/completions"
	case EndpointCompletions:
		return "/completions"
	case EndpointMessages:
		return "/messages"
	case EndpointResponses:
		return "/responses"
	case EndpointGemini:
		return "" // always translated: never sent to an OpenAI-wire upstream
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
	case EndpointMessages:
		return "messages"
	case EndpointResponses:
		return "responses"
	case EndpointGemini:
		return "gemini"
	default:
		return "embeddings"
	}
}

// redactUser returns u with any user and password replaced, for errors.
func redactUser(u *url.URL) string {
	r := *u
	r.User = url.User("REDACTED")
	return r.String()
}

// NormalizeDeployment fills defaults into d and checks that the gateway can
// call it. It is used by the admin API before a deployment is stored.
func NormalizeDeployment(d *pb.Deployment) error {
	if d.GetId() == "" {
		return fmt.Errorf("deployment id is empty")
	}
	applyPreset(d)
	opts := d.GetOptions()
	if v, ok := opts["responses"]; ok && v != "on" && v != "off" {
		return fmt.Errorf("option responses is on or off, not %q (default: on for openai and azure-openai, off for openai-compatible)", v)
	}
	if d.GetProvider() == ProviderDemo {
		return nil
	}
	allowed, err := providerDefaults(d, opts)
	if err != nil {
		return err
	}
	for k := range opts {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("option %q does not apply to provider %s (it takes: %s)", k, d.GetProvider(), strings.Join(allowed, ", "))
		}
	}
	u, err := url.Parse(d.GetBaseUrl())
	if err != nil {
		// Not echoed: it may hold a secret that url.Redacted cannot find.
		return fmt.Errorf("base URL is not an http(s) URL (it does not parse)")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q is not an http(s) URL", u.Redacted())
	}
	if u.User != nil {
		// Base URLs are shown to every role that may read routes; a
		// secret belongs in a sealed credential.
		return fmt.Errorf("base URL %q must not carry a user or password: store the secret with 'tollctl credential set' and name it with --credential", redactUser(u))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("base URL %q must not have a query or fragment", u.Redacted())
	}
	d.BaseUrl = strings.TrimRight(d.GetBaseUrl(), "/")
	if d.GetUpstreamModel() == "" {
		return fmt.Errorf("upstream model is empty")
	}
	return nil
}

// applyPreset turns a deployment whose provider names a preset into an
// openai-compatible one with the preset's base URL (unless it has its own)
// and the option preset=NAME.
func applyPreset(d *pb.Deployment) {
	p, ok := Presets[d.GetProvider()]
	if !ok {
		return
	}
	d.Provider = ProviderOpenAICompatible
	if d.GetBaseUrl() == "" {
		d.BaseUrl = p.BaseURL
	}
	if d.Options == nil {
		d.Options = map[string]string{}
	}
	d.Options["preset"] = p.Name
}

// providerDefaults checks what d's provider requires, fills in its
// default base URL, and returns the options the provider takes.
func providerDefaults(d *pb.Deployment, opts map[string]string) ([]string, error) {
	allowed := []string{"preset"}
	switch d.GetProvider() {
	case ProviderOpenAI:
		allowed = append(allowed, "responses")
		if d.GetBaseUrl() == "" {
			d.BaseUrl = OpenAIBaseURL
		}
	case ProviderOpenAICompatible:
		allowed = append(allowed, "responses")
		if d.GetBaseUrl() == "" {
			return nil, fmt.Errorf("provider %s needs a base URL (the API root including /v1), or name a preset as the provider: %s",
				d.GetProvider(), strings.Join(PresetNames(), ", "))
		}
		if p := opts["preset"]; p != "" {
			if _, ok := Presets[p]; !ok {
				return nil, fmt.Errorf("unknown preset %q; one of %s", p, strings.Join(PresetNames(), ", "))
			}
		}
	case ProviderAzureOpenAI:
		allowed = []string{"api_version", "responses"}
		if d.GetBaseUrl() == "" {
			return nil, fmt.Errorf("provider %s needs a base URL: the resource endpoint, e.g. https://NAME.openai.azure.com", d.GetProvider())
		}
	case ProviderAnthropic:
		if d.GetBaseUrl() == "" {
			d.BaseUrl = AnthropicBaseURL
		}
	case ProviderGemini:
		allowed = []string{"vertex_project", "vertex_location"}
		if d.GetBaseUrl() == "" {
			d.BaseUrl = geminiDefaultBaseURL(opts)
		}
	case ProviderBedrock:
		return bedrockDefaults(d, opts)
	case "":
		return nil, fmt.Errorf("provider is empty; one of %s, or a preset: %s", strings.Join(Providers, ", "), strings.Join(PresetNames(), ", "))
	default:
		return nil, fmt.Errorf("unknown provider %q; one of %s, or a preset: %s", d.GetProvider(), strings.Join(Providers, ", "),
			strings.Join(PresetNames(), ", "))
	}
	return allowed, nil
}

// geminiDefaultBaseURL is the Vertex AI endpoint of the options' location
// for a Vertex project, else the Gemini API's.
func geminiDefaultBaseURL(opts map[string]string) string {
	if opts["vertex_project"] == "" {
		return GeminiBaseURL
	}
	loc := opts["vertex_location"]
	if loc == "" {
		loc = "us-central1"
	}
	return "https://" + loc + "-aiplatform.googleapis.com/v1"
}

// bedrockDefaults checks a Bedrock deployment's options and fills in the
// runtime endpoint of its region.
func bedrockDefaults(d *pb.Deployment, opts map[string]string) ([]string, error) {
	if opts["region"] == "" {
		return nil, fmt.Errorf("provider %s needs the AWS region: --option region=us-east-1", d.GetProvider())
	}
	if v, ok := opts["prompt_caching"]; ok && v != "on" && v != "off" {
		return nil, fmt.Errorf("option prompt_caching is on or off, not %q (default: on for the models Bedrock caches for)", v)
	}
	if d.GetBaseUrl() == "" {
		d.BaseUrl = "https://bedrock-runtime." + opts["region"] + ".amazonaws.com"
	}
	return []string{"region", "prompt_caching"}, nil
}
