package admin

import (
	"strings"

	"google.golang.org/grpc/metadata"
)

// MetadataLagging is the response header in which an admin write names
// the nodes that had not applied it within the leader's bounded wait
// (comma-separated node ids).
const MetadataLagging = "x-tollgate-lagging"

// LaggingNodes returns the nodes a write's response header names as
// lagging.
func LaggingNodes(hdr metadata.MD) []string {
	var nodes []string
	for _, v := range hdr.Get(MetadataLagging) {
		for id := range strings.SplitSeq(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				nodes = append(nodes, id)
			}
		}
	}
	return nodes
}
