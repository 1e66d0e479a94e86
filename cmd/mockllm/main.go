// Command mockllm serves a fake LLM API for tests, benchmarks and demos: the
// OpenAI (also the Responses API and Azure OpenAI's paths), Anthropic Messages,
// Gemini (and Vertex AI) and Bedrock Converse wire formats, with per-request fault injection. See package mock for the behaviour.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
)

const usageText = `Usage: mockllm [flags]

Serves fake LLM APIs in several wire formats:
  OpenAI      POST /v1/chat/completions, POST /v1/completions (both with "stream": true),
              POST /v1/embeddings, GET /v1/models, POST /v1/responses ("stream": true for
              the Responses API's events; function_call items, namespace tools)
  Azure       POST /openai/deployments/{deployment}/chat/completions|completions|embeddings
              (?api-version= required), POST /openai/v1/chat/completions|embeddings|responses,
              POST /openai/responses?api-version=...; key in api-key
  Anthropic   POST /v1/messages ("stream": true for SSE), POST /v1/messages/count_tokens
              (also without /v1); needs x-api-key (or Authorization) and anthropic-version
  Gemini      POST /v1beta/models/{model}:generateContent, :streamGenerateContent
              (?alt=sse for SSE, else a JSON array), :embedContent, :batchEmbedContents
              (also under /v1/models/); needs x-goog-api-key, ?key= or Authorization
  Vertex AI   POST /v1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent,
              :streamGenerateContent, :predict (embeddings) (also under /v1beta1/)
  Bedrock     POST /model/{modelId}/converse, POST /model/{modelId}/converse-stream
              (application/vnd.amazon.eventstream); needs Authorization "AWS4-HMAC-SHA256
              Credential=..." or "Bearer ..." (not verified)
  Control     GET /mock/stats (counters as JSON), POST /mock/reset (zero the counters)

Chat answers in every format: a request with tools gets a call to the first tool
(arguments from its schema: required strings "mock", numbers 1, booleans true); a
last message that is a tool result gets text starting "Tool result received: "
and its first 40 bytes; images make the text start "I see N image(s). ".

Per-request faults and knobs, as X-Mock-<Name> headers or as directives after
a '?' in the request's model name (e.g. "gpt-4o?status=429", "m?latency=300ms&chunks=50");
where the model is in the URL path, escape them: models/gem%3Fstatus%3D500:generateContent.
Errors are written in each format's own error shape.
  status=400..599                    respond with that status and an error body
  fault=reset|hang|reset-mid-stream  TCP reset / never respond / reset after half the output
  latency=<duration>                 delay before the response headers
  chunks=<n>                         stream chunks (text deltas or tool-argument pieces)
  interval=<duration>                gap between stream chunks
  size=<bytes>                       content size of a non-stream completion

Flags:
`

func main() {
	log.SetFlags(0)
	log.SetPrefix("mockllm: ")
	addr := flag.String("addr", "127.0.0.1:8000", "listen `address` (port 0 picks a free port)")
	latency := flag.Duration("latency", 0, "default delay before the response headers")
	chunks := flag.Int("chunks", 10, "default number of stream chunks")
	interval := flag.Duration("interval", 0, "default gap between stream chunks (e.g. 20ms for demos)")
	size := flag.Int("size", 1000, "default content `bytes` of a non-stream completion")
	dims := flag.Int("dims", 8, "embedding dimensions")
	quiet := flag.Bool("quiet", false, "log nothing but fatal errors")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usageText)
		flag.PrintDefaults()
	}
	flag.Parse()
	switch {
	case flag.NArg() > 0:
		log.Fatalf("unexpected arguments %q", flag.Args())
	case *latency < 0 || *interval < 0:
		log.Fatal("--latency and --interval must not be negative")
	case *chunks < 1 || *size < 1 || *dims < 1:
		log.Fatal("--chunks, --size and --dims must be at least 1")
	}
	if *quiet {
		log.SetOutput(io.Discard)
	}

	ms := mock.New(mock.Options{Latency: *latency, Chunks: *chunks, Interval: *interval,
		ContentSize: *size, EmbeddingDims: *dims})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.SetOutput(os.Stderr)
		log.Fatal(err)
	}
	// Cancelling base on shutdown ends hanging and streaming requests.
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           ms,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          log.Default(),
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Printf("listening on http://%s", ln.Addr())

	select {
	case err := <-done:
		log.SetOutput(os.Stderr)
		log.Fatal(err)
	case <-ctx.Done():
	}
	stop() // a second signal kills the process
	log.Print("shutting down")
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Printf("shutdown: %v", err)
	}
	if st, err := json.Marshal(ms.Stats()); err == nil {
		log.Printf("stats: %s", st)
	}
}
