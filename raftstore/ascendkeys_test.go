package raftstore

import (
	"slices"
	"testing"
)

// AscendKeys walks keys in id order from a pivot (which it includes when
// it names a key), and a team's keys only through the team index, even
// when another team's name has this one's as its prefix.
func TestAscendKeysWalksIDOrderFromAPivot(t *testing.T) {
	h := newHarness(t)
	h.must(teamCmd("t1", nil), teamCmd("t10", nil))
	for _, k := range []struct{ id, team string }{{"k_d", "t1"}, {"k_a", ""}, {"k_c", "t10"}, {"k_b", "t1"}, {"k_e", "t1"}} {
		c := createKeyCmd(k.id, "s"+k.id)
		c.GetCreateKey().Key.Key.TeamId = k.team
		h.must(c)
	}
	st := h.state()
	walk := func(team, from string, stop int) []string {
		var ids []string
		st.AscendKeys(team, from, func(k *Key) bool {
			ids = append(ids, k.ID)
			return len(ids) < stop
		})
		return ids
	}
	for _, c := range []struct {
		team, from string
		stop       int
		want       []string
	}{
		{"", "", 10, []string{"k_a", "k_b", "k_c", "k_d", "k_e"}},
		{"", "k_c", 10, []string{"k_c", "k_d", "k_e"}},
		{"", "k_bb", 2, []string{"k_c", "k_d"}},
		{"t1", "", 10, []string{"k_b", "k_d", "k_e"}},
		{"t1", "k_c", 10, []string{"k_d", "k_e"}},
		{"t10", "", 10, []string{"k_c"}},
		{"t2", "", 10, nil},
	} {
		if got := walk(c.team, c.from, c.stop); !slices.Equal(got, c.want) {
			t.Errorf("AscendKeys(%q, %q) = %v, want %v", c.team, c.from, got, c.want)
		}
	}
}
