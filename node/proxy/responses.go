package proxy

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/translate"
)

// droppedToolsHeader names the hosted tools of a Responses request that a
// translated route left out (see routing/translate/responses_tools.go).
const droppedToolsHeader = "X-Tollgate-Dropped-Tools"

// noteDroppedTools tells the client which hosted tools of its request the
// upstream does not get, in a header and a debug log line.
func (h *Handler) noteDroppedTools(w http.ResponseWriter, rec *Record, creq *translate.ChatRequest) {
	if len(creq.DroppedTools) == 0 {
		return
	}
	v := strings.Join(creq.DroppedTools, ", ")
	w.Header().Set(droppedToolsHeader, v)
	h.log.Debug("hosted tools left out of a translated Responses request", "request", rec.RequestID,
		"deployment", rec.Deployment, "tools", v)
}

// azureResponsesPath is where an Azure OpenAI resource takes the
// Responses API (the v1 API: the model is the Azure deployment's name, no
// api-version).
const azureResponsesPath = "/openai/v1/responses"

// attemptResponses passes a Responses request through, untouched but for
// the model's name, to a deployment that speaks the Responses API itself
// (routing.SpeaksResponses). Usage is read from the answer, or from a
// stream's response.completed event, as for chat.
func (h *Handler) attemptResponses(w http.ResponseWriter, r *http.Request, rec *Record, d *raftstore.Deployment, x *exchange) *failure {
	ctx, timeout := h.deadline(r, rec, d)
	defer ctx.end()
	timer, timedOut := ctx.timer, &ctx.timedOut

	w.Header().Del(droppedToolsHeader) // an earlier, translated attempt may have set it
	req := x.req
	capField := ""
	if rec.Reservation != nil && outputLimit(&req, rec.Endpoint) == 0 {
		capField = "max_output_tokens" // the reservation assumed OutputCap
	}
	out := getBuf()
	out.b = routing.RewriteRequestCapped(out.b[:0], x.body, &req, upstreamModel(d, req.Model), false, capField, h.cfg.OutputCap)
	ureq, err := newUpstreamRequest(ctx, d, routing.EndpointResponses, out)
	if err == nil && d.Provider == routing.ProviderAzureOpenAI {
		var u *url.URL
		if u, err = url.Parse(d.BaseURL + azureResponsesPath); err == nil {
			ureq.URL, ureq.Host = u, u.Host
		} else {
			_ = ureq.Body.Close()
		}
	}
	if err != nil {
		return failureOf(errBadUpstreamURL, translate.KindAuth)
	}
	sent := time.Now()
	resp, err := h.transport.RoundTrip(ureq)
	if err != nil {
		return h.transportFailure(r, rec, d, err, timedOut.Load(), timeout)
	}
	defer resp.Body.Close()
	rec.UpstreamLatency = time.Since(sent)
	if isEventStream(resp.Header.Get("Content-Type")) && resp.StatusCode < 300 {
		// Nothing was added to the request, so nothing is hidden from the
		// client: its events go through as the upstream wrote them.
		req.IncludeUsage = true
		return h.stream(w, r, rec, resp, &req, d, attemptClock{timer, timedOut}, responsesEnd)
	}
	return h.buffered(w, r, rec, resp, d, timedOut, timeout)
}
