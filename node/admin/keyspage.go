package admin

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"weak"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// ListKeys pages: keys sorted by id, read from the published State's tree
// by id (or its index by team) starting after the previous page's last id,
// so a page reads about page_size keys whatever the state's size. The
// total of matches needs one walk over every key (or the team's); it is
// remembered for the State it was counted on, so the following pages of
// the same search do not walk again until the next write. The next page's
// token carries the total too, so a listing that writes interleave (each
// one a new State) does not walk every key again for each of its pages: a
// later page reports the total as of the listing's first.

// maxKeysPage bounds ListKeysRequest.page_size.
const maxKeysPage = 1000

// keyFilter is what a ListKeys call asks for: which keys, and from where.
type keyFilter struct {
	revoked bool
	query   string // lower case
	team    string
	after   string // the last key id of the previous page
	total   uint32 // the total the previous page's token carried
	carried bool
}

func newKeyFilter(req *pb.ListKeysRequest) (keyFilter, error) {
	f := keyFilter{revoked: req.GetIncludeRevoked(), query: strings.ToLower(strings.TrimSpace(req.GetQuery())), team: req.GetTeamId()}
	if req.GetPageSize() > maxKeysPage {
		return f, invalid("page_size %d: at most %d", req.GetPageSize(), maxKeysPage)
	}
	if t := req.GetPageToken(); t != "" {
		b, err := base64.RawURLEncoding.DecodeString(t)
		id, total, carried := strings.Cut(string(b), "\x00")
		n, nerr := strconv.ParseUint(total, 10, 32)
		if err != nil || id == "" || carried && nerr != nil {
			return f, invalid("page_token is not one a previous ListKeys answer gave")
		}
		f.after, f.total, f.carried = id, uint32(n), carried
	}
	return f, nil
}

// pageToken is the token of the page after the one ending at id, with the
// total of matches (key ids hold no NUL byte).
func pageToken(id string, total uint32) string {
	return base64.RawURLEncoding.EncodeToString([]byte(id + "\x00" + strconv.FormatUint(uint64(total), 10)))
}

func (f keyFilter) match(sk *pb.StoredKey) bool {
	k := sk.GetKey()
	return f.matchView(&raftstore.Key{ID: k.GetId(), Name: k.GetName(), TeamID: k.GetTeamId(), Revoked: k.GetRevokedAt() != nil})
}

// matchView is match on the State's view of a key, which a walk reads
// without decoding the key.
func (f keyFilter) matchView(k *raftstore.Key) bool {
	if k.Revoked && !f.revoked {
		return false
	}
	if f.team != "" && k.TeamID != f.team {
		return false
	}
	return f.query == "" || containsFold(k.ID, f.query) || containsFold(k.Name, f.query)
}

// page returns the first size matches after f.after, the token of the
// next page when there are more, and the total of matches: remembered for
// st, or counted in the same walk.
func (f keyFilter) page(st *raftstore.State, size int, totals *keyTotals) *pb.ListKeysResponse {
	resp := &pb.ListKeysResponse{Keys: make([]*pb.Key, 0, size)}
	total, known := totals.get(st, f)
	if !known && f.carried {
		total, known = f.total, true
	}
	more := false
	from := f.after
	if !known {
		from = "" // count from the first key
	}
	st.AscendKeys(f.team, from, func(sk *raftstore.Key) bool {
		if !f.matchView(sk) {
			return true
		}
		if !known {
			resp.Total++
		}
		if id := sk.ID; f.after != "" && id <= f.after {
			return true
		}
		if len(resp.Keys) < size {
			resp.Keys = append(resp.Keys, publicKey(sk.Stored()))
		} else {
			more = true
		}
		return !known || !more
	})
	if known {
		resp.Total = total
	} else {
		totals.put(st, f, resp.Total)
	}
	if more {
		resp.NextPageToken = pageToken(resp.Keys[size-1].GetId(), resp.Total)
	}
	return resp
}

// keyTotals remembers the totals of the last few searches on one State
// (weakly: it does not keep a State alive).
type keyTotals struct {
	mu     sync.Mutex
	st     weak.Pointer[raftstore.State]
	counts map[keyFilter]uint32
}

// maxKeyTotals bounds the searches remembered per State.
const maxKeyTotals = 64

func (t *keyTotals) get(st *raftstore.State, f keyFilter) (uint32, bool) {
	f.after = ""
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.counts[f]
	return n, ok && t.st.Value() == st
}

func (t *keyTotals) put(st *raftstore.State, f keyFilter, n uint32) {
	f.after = ""
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.st.Value() != st || len(t.counts) >= maxKeyTotals {
		t.st, t.counts = weak.Make(st), map[keyFilter]uint32{}
	}
	t.counts[f] = n
}

// containsFold reports whether s contains lowerSub (lower case), ignoring
// case; ASCII text of up to 256 bytes is compared without allocating.
func containsFold(s, lowerSub string) bool {
	var buf [256]byte
	if len(s) > len(buf) {
		return strings.Contains(strings.ToLower(s), lowerSub)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(s), lowerSub)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return bytes.Contains(buf[:len(s)], []byte(lowerSub))
}
