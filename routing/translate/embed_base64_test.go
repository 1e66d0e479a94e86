package translate

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"
)

// encoding_format "base64", the default of OpenAI's Node and Python SDKs,
// is accepted for Gemini and answered as OpenAI answers it: little-endian
// float32 values, base64.
func TestGeminiEmbeddingsBase64(t *testing.T) {
	body := []byte(`{"model":"m","input":["a","b"],"encoding_format":"base64"}`)
	if _, n, err := GeminiEmbeddingsRequest(body, &Target{UpstreamModel: "text-embedding-004"}); err != nil || n != 2 {
		t.Fatalf("base64 refused: %v (%d inputs)", err, n)
	}
	if !EmbeddingsBase64(body) || EmbeddingsBase64([]byte(`{"input":"a"}`)) || EmbeddingsBase64([]byte(`{"encoding_format":"float"}`)) {
		t.Fatal("EmbeddingsBase64 misreads encoding_format")
	}
	upstream := []byte(`{"embeddings":[{"values":[0.5,-1.25,3]},{"values":[0.1]}]}`)
	out, _, err := GeminiEmbeddingsResponseAs(upstream, "m", 2, 5, true)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := [][]float32{{0.5, -1.25, 3}, {0.1}}
	for i, d := range resp.Data {
		raw, err := base64.StdEncoding.DecodeString(d.Embedding)
		if err != nil || len(raw) != 4*len(want[i]) {
			t.Fatalf("embedding %d = %q (%v)", i, d.Embedding, err)
		}
		for j, f := range want[i] {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])); got != f {
				t.Errorf("embedding %d[%d] = %v, want %v", i, j, got, f)
			}
		}
	}
	// Floats stay floats without it.
	out, _, _ = GeminiEmbeddingsResponseAs(upstream, "m", 2, 5, false)
	var floats struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &floats); err != nil || floats.Data[0].Embedding[1] != -1.25 {
		t.Errorf("float answer %s (%v)", out, err)
	}
}
