package mock

import (
	"net/http"
	"strings"
)

// format is a wire format: it decides the request and response shapes and
// the shape of errors.
type format uint8

const (
	openAI format = iota
	anthropic
	gemini // Gemini API (generativelanguage.googleapis.com)
	vertex // Vertex AI, Google publisher models: the Gemini shapes on other paths
	bedrock
	azure // Azure OpenAI: the OpenAI shapes on deployment and /openai/v1 paths, key in api-key
	numFormats
)

var formatNames = [numFormats]string{"openai", "anthropic", "gemini", "vertex", "bedrock", "azure"}

// op is what a route does.
type op uint8

const (
	opChat op = iota
	opCompletions
	opEmbeddings
	opModels
	opMessages       // Anthropic
	opCountTokens    // Anthropic
	opGenerate       // Gemini, Vertex
	opStreamGenerate // Gemini, Vertex
	opEmbedContent   // Gemini
	opBatchEmbed     // Gemini
	opPredict        // Vertex embeddings
	opConverse       // Bedrock
	opConverseStream // Bedrock
	opResponses      // OpenAI Responses API
)

// route is one API endpoint. key names it in Stats.ByPath.
type route struct {
	key    string
	format format
	op     op
	method string
}

// Path prefixes of the routes whose paths carry the model.
const (
	geminiPrefix   = "/v1beta/models/"
	geminiV1Prefix = "/v1/models/"
	vertexPrefix   = "/v1/projects/"
	vertexBeta     = "/v1beta1/projects/"
	vertexModels   = "publishers/google/models/"
	bedrockPrefix  = "/model/"
	vertexPattern  = "/projects/{project}/locations/{location}/publishers/google/models/{model}:"
)

var routes = [...]route{
	{"/v1/chat/completions", openAI, opChat, http.MethodPost},
	{"/v1/completions", openAI, opCompletions, http.MethodPost},
	{"/v1/embeddings", openAI, opEmbeddings, http.MethodPost},
	{"/v1/models", openAI, opModels, http.MethodGet},

	{"/v1/messages", anthropic, opMessages, http.MethodPost},
	{"/messages", anthropic, opMessages, http.MethodPost},
	{"/v1/messages/count_tokens", anthropic, opCountTokens, http.MethodPost},
	{"/messages/count_tokens", anthropic, opCountTokens, http.MethodPost},

	{geminiPrefix + "{model}:generateContent", gemini, opGenerate, http.MethodPost},
	{geminiPrefix + "{model}:streamGenerateContent", gemini, opStreamGenerate, http.MethodPost},
	{geminiPrefix + "{model}:embedContent", gemini, opEmbedContent, http.MethodPost},
	{geminiPrefix + "{model}:batchEmbedContents", gemini, opBatchEmbed, http.MethodPost},
	{geminiV1Prefix + "{model}:generateContent", gemini, opGenerate, http.MethodPost},
	{geminiV1Prefix + "{model}:streamGenerateContent", gemini, opStreamGenerate, http.MethodPost},
	{geminiV1Prefix + "{model}:embedContent", gemini, opEmbedContent, http.MethodPost},
	{geminiV1Prefix + "{model}:batchEmbedContents", gemini, opBatchEmbed, http.MethodPost},

	{"/v1" + vertexPattern + "generateContent", vertex, opGenerate, http.MethodPost},
	{"/v1" + vertexPattern + "streamGenerateContent", vertex, opStreamGenerate, http.MethodPost},
	{"/v1" + vertexPattern + "predict", vertex, opPredict, http.MethodPost},
	{"/v1beta1" + vertexPattern + "generateContent", vertex, opGenerate, http.MethodPost},
	{"/v1beta1" + vertexPattern + "streamGenerateContent", vertex, opStreamGenerate, http.MethodPost},
	{"/v1beta1" + vertexPattern + "predict", vertex, opPredict, http.MethodPost},

	{bedrockPrefix + "{modelId}/converse", bedrock, opConverse, http.MethodPost},
	{bedrockPrefix + "{modelId}/converse-stream", bedrock, opConverseStream, http.MethodPost},

	{"/v1/responses", openAI, opResponses, http.MethodPost},
	{azureDeployments + "{deployment}/chat/completions", azure, opChat, http.MethodPost},
	{azureDeployments + "{deployment}/completions", azure, opCompletions, http.MethodPost},
	{azureDeployments + "{deployment}/embeddings", azure, opEmbeddings, http.MethodPost},
	{"/openai/v1/chat/completions", azure, opChat, http.MethodPost},
	{"/openai/v1/embeddings", azure, opEmbeddings, http.MethodPost},
	{"/openai/v1/responses", azure, opResponses, http.MethodPost},
	{"/openai/responses", azure, opResponses, http.MethodPost},
}

// azureDeployments starts the paths of Azure OpenAI's deployment API,
// /openai/deployments/{deployment}/chat/completions?api-version=...
const azureDeployments = "/openai/deployments/"

const numRoutes = len(routes)

// lookup returns the index in routes of the route serving path (-1 for
// none) and, for routes whose path carries it, the model (with any
// directives after a '?'; the server sees the path unescaped, so a client
// sends them as %3F... in the path segment).
func lookup(path string) (int, string) {
	switch path { // the OpenAI routes first: they are the hot path
	case "/v1/chat/completions":
		return 0, ""
	case "/v1/completions":
		return 1, ""
	case "/v1/embeddings":
		return 2, ""
	case "/v1/models":
		return 3, ""
	case "/v1/messages":
		return 4, ""
	case "/messages":
		return 5, ""
	case "/v1/messages/count_tokens":
		return 6, ""
	case "/messages/count_tokens":
		return 7, ""
	}
	var key, model, method string
	switch {
	case strings.HasPrefix(path, geminiPrefix):
		model, method = splitMethod(path[len(geminiPrefix):])
		key = geminiPrefix + "{model}:" + method
	case strings.HasPrefix(path, geminiV1Prefix):
		model, method = splitMethod(path[len(geminiV1Prefix):])
		key = geminiV1Prefix + "{model}:" + method
	case strings.HasPrefix(path, vertexPrefix):
		model, method = vertexModel(path[len(vertexPrefix):])
		key = "/v1" + vertexPattern + method
	case strings.HasPrefix(path, vertexBeta):
		model, method = vertexModel(path[len(vertexBeta):])
		key = "/v1beta1" + vertexPattern + method
	case strings.HasPrefix(path, bedrockPrefix):
		// The model id may hold '/' (an ARN, sent as %2F); the action is
		// the last segment.
		rest := path[len(bedrockPrefix):]
		i := strings.LastIndexByte(rest, '/')
		if i <= 0 {
			return -1, ""
		}
		model, key = rest[:i], bedrockPrefix+"{modelId}/"+rest[i+1:]
	case strings.HasPrefix(path, azureDeployments):
		// The deployment stands for the model.
		dep, op, ok := strings.Cut(path[len(azureDeployments):], "/")
		if !ok {
			return -1, ""
		}
		model, key = dep, azureDeployments+"{deployment}/"+op
	default:
		return lookupFixed(path)
	}
	if model == "" {
		return -1, ""
	}
	for i := 8; i < numRoutes; i++ {
		if routes[i].key == key {
			return i, model
		}
	}
	return -1, ""
}

// lookupFixed returns the index of the route with the fixed path path that
// lookup's switch does not list, or -1.
func lookupFixed(path string) (int, string) {
	for i := 8; i < numRoutes; i++ {
		if routes[i].key == path {
			return i, ""
		}
	}
	return -1, ""
}

// splitMethod splits "{model}:{method}" at the last ':'.
func splitMethod(s string) (model, method string) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", ""
	}
	return s[:i], s[i+1:]
}

// vertexModel parses "{project}/locations/{location}/publishers/google/models/{model}:{method}".
func vertexModel(s string) (model, method string) {
	project, s, _ := strings.Cut(s, "/")
	s, ok := strings.CutPrefix(s, "locations/")
	if !ok || project == "" {
		return "", ""
	}
	location, s, _ := strings.Cut(s, "/")
	s, ok = strings.CutPrefix(s, vertexModels)
	if !ok || location == "" {
		return "", ""
	}
	return splitMethod(s)
}

// guessFormat picks the error shape for a path no route serves.
func guessFormat(path string) format {
	switch {
	case strings.HasPrefix(path, "/v1/messages"), strings.HasPrefix(path, "/messages"):
		return anthropic
	case strings.HasPrefix(path, geminiPrefix), strings.HasPrefix(path, "/v1beta/"),
		strings.HasPrefix(path, geminiV1Prefix) && strings.IndexByte(path, ':') >= 0:
		return gemini
	case strings.HasPrefix(path, vertexPrefix), strings.HasPrefix(path, vertexBeta):
		return vertex
	case strings.HasPrefix(path, bedrockPrefix):
		return bedrock
	}
	return openAI
}
