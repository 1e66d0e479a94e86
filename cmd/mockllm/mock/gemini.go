package mock

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// The Gemini API (ai.google.dev/api: generateContent, streamGenerateContent,
// embedContent, batchEmbedContents) and Vertex AI's Google publisher models
// (generateContent, streamGenerateContent, predict for text embeddings),
// which share the request and response shapes.
//
// The REST API accepts field names in lowerCamelCase and, as protobuf JSON
// does, in snake_case; the mock reads both for the fields its answer
// depends on.

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text                  string          `json:"text"`
	InlineData            *geminiBlob     `json:"inlineData"`
	InlineDataSnake       *geminiBlob     `json:"inline_data"`
	FileData              *geminiBlob     `json:"fileData"`
	FileDataSnake         *geminiBlob     `json:"file_data"`
	FunctionResponse      *geminiFuncResp `json:"functionResponse"`
	FunctionResponseSnake *geminiFuncResp `json:"function_response"`
}

type geminiBlob struct {
	MimeType      string `json:"mimeType"`
	MimeTypeSnake string `json:"mime_type"`
}

// isImage reports whether the blob is an image: its MIME type is image/*
// or not given.
func (b *geminiBlob) isImage() bool {
	mt := b.MimeType + b.MimeTypeSnake
	return mt == "" || strings.HasPrefix(mt, "image/")
}

type geminiFuncResp struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type geminiFunc struct {
	Name                 string          `json:"name"`
	Parameters           json.RawMessage `json:"parameters"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
}

// geminiRequest is the union of the request fields of the Gemini routes.
type geminiRequest struct {
	Contents               []geminiContent `json:"contents"`
	SystemInstruction      *geminiContent  `json:"systemInstruction"`
	SystemInstructionSnake *geminiContent  `json:"system_instruction"`
	Tools                  []struct {
		FunctionDeclarations      []geminiFunc `json:"functionDeclarations"`
		FunctionDeclarationsSnake []geminiFunc `json:"function_declarations"`
	} `json:"tools"`
	ToolConfig struct {
		FunctionCallingConfig struct {
			Mode                 string   `json:"mode"` // AUTO, ANY, NONE, VALIDATED
			AllowedFunctionNames []string `json:"allowedFunctionNames"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig struct {
		MaxOutputTokens int `json:"maxOutputTokens"`
	} `json:"generationConfig"`

	// embedContent
	Content              *geminiContent `json:"content"`
	OutputDimensionality int            `json:"outputDimensionality"`
	// batchEmbedContents
	Requests []struct {
		Content              geminiContent `json:"content"`
		OutputDimensionality int           `json:"outputDimensionality"`
	} `json:"requests"`
	// Vertex predict (text embeddings)
	Instances []struct {
		Content string `json:"content"`
	} `json:"instances"`
	Parameters struct {
		OutputDimensionality int `json:"outputDimensionality"`
	} `json:"parameters"`
}

// googleStatuses are the google.rpc status names of HTTP error statuses;
// other statuses get INVALID_ARGUMENT (4xx) or INTERNAL (5xx).
var googleStatuses = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL",
	501: "NOT_IMPLEMENTED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

// googleError writes {"error":{"code":...,"message":...,"status":...}};
// a 429 also carries a google.rpc.RetryInfo detail of one second.
func (s *Server) googleError(w http.ResponseWriter, status int, msg string) {
	name, ok := googleStatuses[status]
	if !ok {
		name = "INVALID_ARGUMENT"
		if status >= 500 {
			name = "INTERNAL"
		}
	}
	buf := getBuf()
	defer putBuf(buf)
	b := strconv.AppendInt(append((*buf)[:0], `{"error":{"code":`...), int64(status), 10)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"status":"`...)
	b = append(b, name...)
	b = append(b, '"')
	if status == http.StatusTooManyRequests {
		b = append(b, `,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}]`...)
	}
	b = append(b, "}}"...)
	*buf = b
	s.writeJSONError(w, status, b)
}

func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request, rt *route, model string) {
	query := r.URL.Query()
	auth, source := r.Header.Get("X-Goog-Api-Key"), "x-goog-api-key"
	if auth == "" {
		auth, source = query.Get("key"), "key"
	}
	if auth == "" {
		auth, source = r.Header.Get("Authorization"), "authorization"
	}
	buf := getBuf()
	defer putBuf(buf)
	body, ok := s.readRecorded(w, r, buf, rt.format, auth, source)
	if !ok {
		return
	}
	fail := func(status int, msg string) { s.googleError(w, status, msg) }
	switch {
	case auth == "" && rt.format == vertex:
		fail(http.StatusUnauthorized, "Request is missing required authentication credential. Expected OAuth 2 access token or other valid authentication credential.")
		return
	case auth == "":
		fail(http.StatusForbidden, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
		return
	}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		fail(http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return
	}
	p := s.params()
	model, err := p.directives(r.Header, model)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	switch {
	case (rt.op == opGenerate || rt.op == opStreamGenerate) && len(req.Contents) == 0:
		err = errMissing("GenerateContentRequest.contents")
	case rt.op == opEmbedContent && req.Content == nil:
		err = errMissing("EmbedContentRequest.content")
	case rt.op == opBatchEmbed && len(req.Requests) == 0:
		err = errMissing("BatchEmbedContentsRequest.requests")
	case rt.op == opPredict && len(req.Instances) == 0:
		err = errMissing("PredictRequest.instances")
	}
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	if s.inject(w, r.Context(), &p, rt.format) {
		return
	}
	switch rt.op {
	case opGenerate, opStreamGenerate:
		t := geminiTurn(&req)
		stream := rt.op == opStreamGenerate
		rp := t.plan(&p, stream)
		id := "mock-" + strconv.FormatInt(s.seq.Add(1), 10)
		if stream {
			s.finish(s.geminiStream(w, r.Context(), &p, query.Get("alt") == "sse", id, model, &rp))
			return
		}
		b := appendGeminiHead((*buf)[:0])
		if rp.text != "" {
			b = appendGeminiText(b, rp.text)
		}
		b = appendGeminiTail(b, &rp, true, id, model)
		*buf = b
		s.finish(s.writeBody(w, http.StatusOK, b, p.fault == faultMidStream))
	default:
		*buf = s.googleEmbeddings((*buf)[:0], rt.op, &req)
		s.finish(s.writeBody(w, http.StatusOK, *buf, p.fault == faultMidStream))
	}
}

type errMissing string

func (e errMissing) Error() string { return "* " + string(e) + ": field is not specified" }

// geminiTurn digests a generateContent request.
func geminiTurn(req *geminiRequest) *turn {
	t := &turn{maxTokens: req.GenerationConfig.MaxOutputTokens}
	for _, sys := range []*geminiContent{req.SystemInstruction, req.SystemInstructionSnake} {
		if sys != nil {
			for _, part := range sys.Parts {
				t.systemBytes += len(part.Text)
				t.promptChars += runeCount(part.Text)
			}
		}
	}
	for i, c := range req.Contents {
		var result *string
		for _, part := range c.Parts {
			t.promptChars += runeCount(part.Text)
			for _, blob := range []*geminiBlob{part.InlineData, part.InlineDataSnake, part.FileData, part.FileDataSnake} {
				if blob != nil && blob.isImage() {
					t.images++
				}
			}
			fr := part.FunctionResponse
			if fr == nil {
				fr = part.FunctionResponseSnake
			}
			if fr != nil {
				text := jsonText(fr.Response)
				t.promptChars += runeCount(text)
				if result == nil {
					result = &text
				}
			}
		}
		if i == len(req.Contents)-1 && result != nil {
			t.hasResult, t.result = true, *result
		}
	}
	for _, tl := range req.Tools {
		for _, fns := range [][]geminiFunc{tl.FunctionDeclarations, tl.FunctionDeclarationsSnake} {
			for _, fn := range fns {
				schema := fn.Parameters
				if len(schema) == 0 {
					schema = fn.ParametersJSONSchema
				}
				t.tools = append(t.tools, tool{fn.Name, schema})
			}
		}
	}
	fc := &req.ToolConfig.FunctionCallingConfig
	switch strings.ToUpper(fc.Mode) {
	case "NONE":
		t.choice = choiceNone
	case "ANY", "VALIDATED":
		if len(fc.AllowedFunctionNames) > 0 {
			t.choice = fc.AllowedFunctionNames[0]
		}
	}
	return t
}

// appendGeminiHead starts a GenerateContentResponse, up to its candidate's parts.
func appendGeminiHead(b []byte) []byte {
	return append(b, `{"candidates":[{"content":{"parts":[`...)
}

func appendGeminiText(b []byte, text string) []byte {
	b = append(b, `{"text":`...)
	return append(appendString(b, text), '}')
}

// appendGeminiTail ends a GenerateContentResponse: the function call if
// the answer is one, then with final the finish reason and full usage, else
// the usage known so far (the prompt's).
func appendGeminiTail(b []byte, rp *reply, final bool, id, model string) []byte {
	if final && rp.tool != nil {
		if b[len(b)-1] == '}' {
			b = append(b, ',')
		}
		b = append(b, `{"functionCall":{"name":`...)
		b = appendString(b, rp.tool.name)
		b = append(b, `,"args":`...)
		b = append(b, rp.args...)
		b = append(b, "}}"...)
	}
	b = append(b, `],"role":"model"}`...)
	if final {
		if rp.stop == stopMax {
			b = append(b, `,"finishReason":"MAX_TOKENS"`...)
		} else {
			b = append(b, `,"finishReason":"STOP"`...)
		}
	}
	b = append(b, `,"index":0}],"usageMetadata":{"promptTokenCount":`...)
	b = strconv.AppendInt(b, int64(rp.prompt), 10)
	if final {
		b = append(b, `,"candidatesTokenCount":`...)
		b = strconv.AppendInt(b, int64(rp.output), 10)
		b = append(b, `,"totalTokenCount":`...)
		b = strconv.AppendInt(b, int64(rp.prompt+rp.output), 10)
		if rp.cached > 0 {
			b = append(b, `,"cachedContentTokenCount":`...)
			b = strconv.AppendInt(b, int64(rp.cached), 10)
		}
	} else {
		b = append(b, `,"totalTokenCount":`...)
		b = strconv.AppendInt(b, int64(rp.prompt), 10)
	}
	b = append(b, `},"modelVersion":`...)
	b = appendString(b, model)
	b = append(b, `,"responseId":"`...)
	b = append(b, id...)
	return append(b, `"}`...)
}

// geminiStream streams GenerateContentResponses: with sse as server-sent
// events ("data: {...}\r\n\r\n"), else as the elements of a JSON array.
// Each text delta is one response; the last carries the finish reason and
// the full usage (the others the prompt's usage only, as Gemini does). A
// function call comes whole in the last response, after the prefix text.
func (s *Server) geminiStream(w http.ResponseWriter, ctx context.Context, p *params, sse bool, id, model string, rp *reply) error {
	events := rp.deltas
	if rp.tool != nil {
		events = 1
	}
	ct := sseType
	if !sse {
		ct = jsonType
	}
	st := s.startStream(w, ctx, p, ct, events)
	defer st.end()
	buf := getBuf()
	defer putBuf(buf)
	b := (*buf)[:0]
	defer func() { *buf = b }()
	for i := range events {
		if err := st.delta(); err != nil {
			return err
		}
		switch {
		case sse:
			b = append(b[:0], "data: "...)
		case i == 0:
			b = append(b[:0], '[')
		default:
			b = append(b[:0], ",\r\n"...)
		}
		b = appendGeminiHead(b)
		if rp.tool == nil || rp.deltas > 0 {
			b = append(b, `{"text":"`...)
			b = append(rp.delta(b, i), `"}`...)
		}
		b = appendGeminiTail(b, rp, i == events-1, id, model)
		if sse {
			b = append(b, "\r\n\r\n"...)
		} else if i == events-1 {
			b = append(b, ']')
		}
		if err := st.send(b); err != nil {
			return err
		}
	}
	return nil
}

// googleEmbeddings appends the response of an embedContent,
// batchEmbedContents or (Vertex) predict request. Vectors are determined by
// the input text, so the same text gets the same vector in every format.
func (s *Server) googleEmbeddings(b []byte, o op, req *geminiRequest) []byte {
	dims := func(d int) int {
		if d > 0 {
			return min(d, 4096)
		}
		return s.opts.EmbeddingDims
	}
	vector := func(b []byte, text string, d int) []byte {
		in, _ := json.Marshal(text)
		return appendVector(b, fillVector(make([]float32, dims(d)), in), false)
	}
	switch o {
	case opEmbedContent:
		b = append(b, `{"embedding":{"values":`...)
		b = vector(b, partsText(req.Content.Parts), req.OutputDimensionality)
		return append(b, "}}"...)
	case opBatchEmbed:
		b = append(b, `{"embeddings":[`...)
		for i, r := range req.Requests {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"values":`...)
			b = append(vector(b, partsText(r.Content.Parts), r.OutputDimensionality), '}')
		}
		return append(b, "]}"...)
	}
	b = append(b, `{"predictions":[`...)
	chars := 0
	for i, in := range req.Instances {
		if i > 0 {
			b = append(b, ',')
		}
		n := runeCount(in.Content)
		chars += n
		b = append(b, `{"embeddings":{"statistics":{"truncated":false,"token_count":`...)
		b = strconv.AppendInt(b, int64(max(1, tokens(n))), 10)
		b = append(b, `},"values":`...)
		b = append(vector(b, in.Content, req.Parameters.OutputDimensionality), "}}"...)
	}
	b = append(b, `],"metadata":{"billableCharacterCount":`...)
	b = strconv.AppendInt(b, int64(chars), 10)
	return append(b, "}}"...)
}

func partsText(parts []geminiPart) string {
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
	}
	return sb.String()
}
