package mcp

import (
	"regexp"
	"strings"
)

// scrubSessionID takes upstream session ids out of an error's text before
// it is logged or shown as a server's last error (`tollctl mcp get`).
// The SDK names the session in its errors ("(session ID: …)", "mismatching
// session IDs "…" and "…""), and whoever holds an id, with the server's
// credential, could act in the node's session. id, when known, is removed
// wherever it appears; the SDK's own phrasings are caught without it.
func scrubSessionID(why, id string) string {
	if id != "" {
		why = strings.ReplaceAll(why, id, redactedSession)
	}
	why = sdkSessionIDs.ReplaceAllString(why, "${1}"+redactedSession+" and "+redactedSession)
	return sdkSessionID.ReplaceAllString(why, "${1}"+redactedSession)
}

const redactedSession = "[session]"

// sdkSessionID matches "session ID: X" and "session ID X"; sdkSessionIDs
// the SDK's `mismatching session IDs "X" and "Y"`.
var (
	sdkSessionID  = regexp.MustCompile(`((?i:session ID):? )"?[^\s"()]+"?`)
	sdkSessionIDs = regexp.MustCompile(`((?i:session IDs) )"[^"]*" and "[^"]*"`)
)
