package main

import (
	"cmp"
	"context"
	"slices"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// keyListPage is how many keys `tollctl key list` asks for per call: the
// server's most. One answer holding every key would pass gRPC's 4 MiB
// message limit at about 50,000 keys.
const keyListPage = 1000

// listEveryKey reads every key page by page and returns them in creation
// order (then by id), the order key list has always printed.
func listEveryKey(ctx context.Context, keys tollgatev1.KeyServiceClient, revoked bool) ([]*tollgatev1.Key, error) {
	var out []*tollgatev1.Key
	req := &tollgatev1.ListKeysRequest{IncludeRevoked: revoked, PageSize: keyListPage}
	for {
		resp, err := keys.ListKeys(ctx, req)
		if err != nil {
			return nil, err
		}
		out = append(out, resp.GetKeys()...)
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	slices.SortStableFunc(out, func(a, b *tollgatev1.Key) int {
		if c := a.GetCreatedAt().AsTime().Compare(b.GetCreatedAt().AsTime()); c != 0 {
			return c
		}
		return cmp.Compare(a.GetId(), b.GetId())
	})
	return out, nil
}
