package translate

// Embeddings for Gemini API clients: embedContent and batchEmbedContents
// requests become an OpenAI embeddings request (the texts as input,
// outputDimensionality as dimensions), which the gateway serves like any
// other, and the OpenAI answer goes back as {"embedding":{"values"}} or
// {"embeddings":[{"values"}]}. taskType and title only tune the embedding
// and are dropped; a part other than text is refused.

import (
	"encoding/json"
	"fmt"
	"strings"
)

type geminiEmbedIn struct {
	Model                string          `json:"model"`
	Content              geminiContentIn `json:"content"`
	OutputDimensionality *int64          `json:"outputDimensionality"`
}

// GeminiEmbedRequest turns an embedContent (batch false) or
// batchEmbedContents request for model into an OpenAI embeddings request.
func GeminiEmbedRequest(body []byte, model string, batch bool) ([]byte, error) {
	var reqs []geminiEmbedIn
	if batch {
		var in struct {
			Requests []geminiEmbedIn `json:"requests"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, Invalid("", "Invalid JSON payload received: %v", err)
		}
		if len(in.Requests) == 0 {
			return nil, geminiInvalid("requests", "at least one request is required")
		}
		reqs = in.Requests
	} else {
		var in geminiEmbedIn
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, Invalid("", "Invalid JSON payload received: %v", err)
		}
		reqs = []geminiEmbedIn{in}
	}
	out := struct {
		Model      string   `json:"model"`
		Input      []string `json:"input"`
		Dimensions *int64   `json:"dimensions,omitempty"`
	}{Model: strings.TrimPrefix(model, "models/")}
	for i, r := range reqs {
		path := "content"
		if batch {
			path = fmt.Sprintf("requests[%d].content", i)
		}
		var text strings.Builder
		for j, p := range r.Content.Parts {
			if p.Text == nil {
				return nil, geminiInvalid(fmt.Sprintf("%s.parts[%d]", path, j), "only text can be embedded through this gateway")
			}
			text.WriteString(*p.Text)
		}
		if text.Len() == 0 {
			return nil, geminiInvalid(path, "the content to embed is empty")
		}
		out.Input = append(out.Input, text.String())
		if r.OutputDimensionality != nil {
			out.Dimensions = r.OutputDimensionality
		}
	}
	return json.Marshal(out)
}

// GeminiEmbedResponse turns an OpenAI embeddings answer into embedContent's
// (batch false) or batchEmbedContents' answer.
func GeminiEmbedResponse(body []byte, batch bool) ([]byte, error) {
	var in struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, BadResponse("embeddings", "%v", err)
	}
	type values struct {
		Values []float64 `json:"values"`
	}
	vs := make([]values, len(in.Data))
	for _, d := range in.Data {
		if d.Index < 0 || d.Index >= len(vs) {
			return nil, BadResponse("embeddings", "embedding index %d out of range", d.Index)
		}
		vs[d.Index] = values{d.Embedding}
	}
	if batch {
		return json.Marshal(map[string]any{"embeddings": vs})
	}
	if len(vs) != 1 {
		return nil, BadResponse("embeddings", "%d embeddings for one content", len(vs))
	}
	return json.Marshal(map[string]any{"embedding": vs[0]})
}
