package translate

// Embeddings through Gemini: an OpenAI embeddings request becomes AI
// Studio's batchEmbedContents or Vertex AI's predict, and the answer is
// written back as OpenAI's embeddings response.
//
// Rules:
//   - input is a string or an array of non-empty strings; token arrays
//     (arrays of integers, or arrays of them) are refused: Gemini embeds
//     text only.
//   - dimensions → outputDimensionality.
//   - encoding_format "base64" (the default of OpenAI's Node and Python
//     SDKs) is answered by encoding Gemini's floats as OpenAI does: each
//     vector as little-endian float32 values, base64 (standard alphabet);
//     "float" or absent gives JSON numbers.
//   - user is dropped.
//   - the number of inputs per request is not limited here: the upstream
//     refuses batches above its limit (100 on AI Studio; on Vertex it
//     depends on the model) with a 400 that reaches the client.
//   - usage: AI Studio reports no token counts, so prompt_tokens is the
//     estimate the caller computed; Vertex reports statistics.token_count
//     per input and their sum is used (the estimate when any is missing).

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
)

// GeminiEmbeddingsRequest encodes the OpenAI embeddings request body for
// the Gemini target t and returns the upstream request (without a context)
// and the number of inputs.
func GeminiEmbeddingsRequest(body []byte, t *Target) (*http.Request, int, error) {
	var in struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		Dimensions     *int64          `json:"dimensions"`
		EncodingFormat string          `json:"encoding_format"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, 0, Invalid("", "The request body is not a valid embeddings request: %v", err)
	}
	inputs, err := geminiEmbedInputs(in.Input)
	if err != nil {
		return nil, 0, err
	}
	switch in.EncodingFormat {
	case "", "float", "base64":
	default:
		return nil, 0, Invalid("encoding_format", "Unknown encoding_format %q.", in.EncodingFormat)
	}
	if in.Dimensions != nil && *in.Dimensions < 1 {
		return nil, 0, Invalid("dimensions", "'dimensions' must be at least 1.")
	}
	model := geminiModel(t, in.Model)
	vertex := t.Options["vertex_project"] != ""
	method := "batchEmbedContents"
	if vertex {
		method = "predict"
	}
	u, _, err := geminiEndpoint(t, model, method)
	if err != nil {
		return nil, 0, err
	}
	var payload any
	if vertex {
		payload = geminiVertexEmbedPayload(inputs, in.Dimensions)
	} else {
		payload = geminiBatchEmbedPayload(model, inputs, in.Dimensions)
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, 0, fmt.Errorf("gemini: encoding the embeddings request: %w", err)
	}
	r, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return nil, 0, fmt.Errorf("gemini: %w", err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	geminiAuthorize(r, t, vertex)
	return r, len(inputs), nil
}

// geminiVertexEmbedPayload is a Vertex AI predict request for the inputs.
func geminiVertexEmbedPayload(inputs []string, dims *int64) any {
	type instance struct {
		Content string `json:"content"`
	}
	type parameters struct {
		OutputDimensionality *int64 `json:"outputDimensionality,omitempty"`
	}
	p := struct {
		Instances  []instance  `json:"instances"`
		Parameters *parameters `json:"parameters,omitempty"`
	}{}
	for _, s := range inputs {
		p.Instances = append(p.Instances, instance{Content: s})
	}
	if dims != nil {
		p.Parameters = &parameters{OutputDimensionality: dims}
	}
	return p
}

// geminiBatchEmbedPayload is a Gemini API batchEmbedContents request for
// the inputs.
func geminiBatchEmbedPayload(model string, inputs []string, dims *int64) any {
	type request struct {
		Model                string        `json:"model"`
		Content              geminiContent `json:"content"`
		OutputDimensionality *int64        `json:"outputDimensionality,omitempty"`
	}
	// Each request names the model of the URL, "models/<id>".
	name := model
	if !strings.HasPrefix(name, "models/") && !strings.HasPrefix(name, "tunedModels/") {
		name = "models/" + name
	}
	p := struct {
		Requests []request `json:"requests"`
	}{}
	for _, s := range inputs {
		p.Requests = append(p.Requests, request{
			Model:                name,
			Content:              geminiContent{Parts: []geminiPart{geminiText(s)}},
			OutputDimensionality: dims,
		})
	}
	return p
}

// geminiEmbedInputs reads OpenAI's input: a string or an array of strings.
func geminiEmbedInputs(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, Invalid("input", "'input' is required.")
	}
	var inputs []string
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, Invalid("input", "'input' is not a valid string: %v", err)
		}
		inputs = []string{s}
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, Invalid("input", "'input' is not a valid array: %v", err)
		}
		if len(items) == 0 {
			return nil, Invalid("input", "'input' must not be empty.")
		}
		for i, it := range items {
			it = bytes.TrimSpace(it)
			if len(it) == 0 || it[0] != '"' {
				return nil, Invalid(fmt.Sprintf("input[%d]", i),
					"The gemini provider embeds text only: 'input' must be a string or an array of strings, not tokens.")
			}
			var s string
			if err := json.Unmarshal(it, &s); err != nil {
				return nil, Invalid(fmt.Sprintf("input[%d]", i), "Not a valid string: %v", err)
			}
			inputs = append(inputs, s)
		}
	default:
		return nil, Invalid("input", "'input' must be a string or an array of strings.")
	}
	for i, s := range inputs {
		if s == "" {
			return nil, Invalid(fmt.Sprintf("input[%d]", i), "An input must not be an empty string.")
		}
	}
	return inputs, nil
}

// GeminiEmbeddingsResponse writes a successful Gemini embeddings answer
// (AI Studio's batchEmbedContents or Vertex's predict) as OpenAI's
// embeddings response for model. inputs is the count GeminiEmbeddingsRequest
// returned; promptTokens is the caller's estimate of the input tokens, used
// where the upstream reports none.
func GeminiEmbeddingsResponse(body []byte, model string, inputs int, promptTokens int64) ([]byte, *Usage, error) {
	return GeminiEmbeddingsResponseAs(body, model, inputs, promptTokens, false)
}

// EmbeddingsBase64 reports whether an OpenAI embeddings request asks for
// encoding_format "base64".
func EmbeddingsBase64(reqBody []byte) bool {
	var in struct {
		EncodingFormat string `json:"encoding_format"`
	}
	return json.Unmarshal(reqBody, &in) == nil && in.EncodingFormat == "base64"
}

// embeddingBase64 encodes a vector as OpenAI's base64 embeddings are:
// little-endian float32 values.
func embeddingBase64(v []float64) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f)))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// GeminiEmbeddingsResponseAs is GeminiEmbeddingsResponse that, with b64,
// writes each embedding as a base64 string (encoding_format "base64").
func GeminiEmbeddingsResponseAs(body []byte, model string, inputs int, promptTokens int64, b64 bool) ([]byte, *Usage, error) {
	var r struct {
		Embeddings *[]struct {
			Values []float64 `json:"values"`
		} `json:"embeddings"`
		Predictions *[]struct {
			Embeddings struct {
				Values     []float64 `json:"values"`
				Statistics *struct {
					TokenCount *float64 `json:"token_count"`
				} `json:"statistics"`
			} `json:"embeddings"`
		} `json:"predictions"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, nil, BadResponse(geminiName, "%v", err)
	}
	var vectors [][]float64
	tokens := promptTokens
	switch {
	case r.Predictions != nil:
		var sum int64
		counted := true
		for _, p := range *r.Predictions {
			vectors = append(vectors, p.Embeddings.Values)
			st := p.Embeddings.Statistics
			if st == nil || st.TokenCount == nil || *st.TokenCount < 0 || *st.TokenCount > math.MaxInt32 {
				counted = false
				continue
			}
			sum += int64(math.Round(*st.TokenCount))
		}
		if counted && len(vectors) > 0 {
			tokens = sum
		}
	case r.Embeddings != nil:
		for _, e := range *r.Embeddings {
			vectors = append(vectors, e.Values)
		}
	default:
		return nil, nil, BadResponse(geminiName, "the embeddings answer has neither embeddings nor predictions")
	}
	if len(vectors) != inputs {
		return nil, nil, BadResponse(geminiName, "%d embeddings were asked for and %d came back", inputs, len(vectors))
	}
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"` // []float64, or a base64 string
	}
	type usage struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	}
	out := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  usage  `json:"usage"`
	}{Object: "list", Data: make([]item, len(vectors)), Model: model, Usage: usage{tokens, tokens}}
	for i, v := range vectors {
		if len(v) == 0 {
			return nil, nil, BadResponse(geminiName, "embedding %d is empty", i)
		}
		out.Data[i] = item{Object: "embedding", Index: i, Embedding: v}
		if b64 {
			out.Data[i].Embedding = embeddingBase64(v)
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, nil, BadResponse(geminiName, "%v", err)
	}
	return b, &Usage{PromptTokens: tokens, TotalTokens: tokens}, nil
}
