package proxy

import (
	"net/http"
	"strings"

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
