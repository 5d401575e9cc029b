package strict

import (
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

func TestRaftServerID(t *testing.T) {
	tests := []struct {
		name    string
		boot    uint64
		durable bool
		want    raft.ServerID
	}{
		{"n0", 0xab, true, "n0"},
		{"n0", 0xab, false, "n0#00000000000000ab"},
		{"a#b", 1, false, "a#b#0000000000000001"},
	}
	for _, tt := range tests {
		got := raftServerID(tt.name, tt.boot, tt.durable)
		if got != tt.want {
			t.Errorf("raftServerID(%q, %x, %v) = %q, want %q", tt.name, tt.boot, tt.durable, got, tt.want)
		}
		if name := serverName(got); name != tt.name {
			t.Errorf("serverName(%q) = %q, want %q", got, name, tt.name)
		}
	}
	for _, id := range []raft.ServerID{"n0", "n0#", "n0#xyz", "n0#00000000000000zz", "n0#0000000000000001a"} {
		if got := serverName(id); got != string(id) {
			t.Errorf("serverName(%q) = %q; an ID without a boot suffix is the name", id, got)
		}
	}
}

func TestSurvivorsOf(t *testing.T) {
	voter := func(id raft.ServerID) raft.Server { return raft.Server{ID: id, Suffrage: raft.Voter} }
	a1, a2 := raftServerID("a", 1, false), raftServerID("a", 2, false)
	b1, b2 := raftServerID("b", 1, false), raftServerID("b", 2, false)
	c1 := raftServerID("c", 1, false)
	d1, e1 := raftServerID("d", 1, false), raftServerID("e", 1, false)
	conf3 := raft.Configuration{Servers: []raft.Server{voter(a1), voter(b1), voter(c1)}}
	conf5 := raft.Configuration{Servers: []raft.Server{voter(a1), voter(b1), voter(c1), voter(d1), voter(e1)}}
	tests := []struct {
		what    string
		conf    raft.Configuration
		self    raft.ServerID
		current map[string]raft.ServerID
		lost    bool
		left    []raft.ServerID
	}{
		{"all live", conf3, c1, map[string]raft.ServerID{"a": a1, "b": b1, "c": c1}, false, nil},
		{"one restarted: a majority is left", conf3, c1, map[string]raft.ServerID{"a": a2, "b": b1, "c": c1}, false, nil},
		{"two dead, not restarted: they may come back", conf3, c1, map[string]raft.ServerID{"c": c1}, false, nil},
		{"one restarted, one dead: the dead one may come back", conf3, c1, map[string]raft.ServerID{"a": a2, "c": c1}, false, nil},
		{"two restarted", conf3, c1, map[string]raft.ServerID{"a": a2, "b": b2, "c": c1}, true, []raft.ServerID{c1}},
		{"self restarted is not a survivor", conf3, a2, map[string]raft.ServerID{"a": a2, "b": b2, "c": raftServerID("c", 2, false)}, false, nil},
		{"three of five restarted", conf5, d1,
			map[string]raft.ServerID{"a": a2, "b": b2, "c": raftServerID("c", 2, false), "d": d1}, true, []raft.ServerID{d1, e1}},
		{"two of five restarted", conf5, d1, map[string]raft.ServerID{"a": a2, "b": b2, "c": c1, "d": d1}, false, nil},
		{"durable names are never superseded", raft.Configuration{Servers: []raft.Server{voter("a"), voter("b"), voter("c")}}, "c",
			map[string]raft.ServerID{"a": "a", "b": "b", "c": "c"}, false, nil},
		{"a node that lost its data dir is superseded", raft.Configuration{Servers: []raft.Server{voter("a"), voter("b"), voter("c")}}, "c",
			map[string]raft.ServerID{"a": a2, "b": b2, "c": "c"}, true, []raft.ServerID{"c"}},
		{"non-voters are not counted", raft.Configuration{Servers: []raft.Server{voter(a1), voter(c1),
			{ID: b1, Suffrage: raft.Nonvoter}}}, c1, map[string]raft.ServerID{"a": a2, "b": b2, "c": c1}, true, []raft.ServerID{c1}},
	}
	for _, tt := range tests {
		t.Run(tt.what, func(t *testing.T) {
			conf, lost := survivorsOf(tt.conf, tt.self, tt.current)
			if lost != tt.lost {
				t.Fatalf("lost = %v, want %v (configuration %v)", lost, tt.lost, tt.conf.Servers)
			}
			var left []raft.ServerID
			for _, s := range conf.Servers {
				left = append(left, s.ID)
				if s.Suffrage != raft.Voter {
					t.Errorf("%s is left as %v, want a voter", s.ID, s.Suffrage)
				}
			}
			if !slices.Equal(left, tt.left) {
				t.Errorf("left %v, want %v", left, tt.left)
			}
		})
	}
}
