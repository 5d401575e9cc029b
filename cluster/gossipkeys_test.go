package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/sluicehq/sluice/window"
)

// gossipKey is a key of size bytes, the same on every run, that differs
// by seed.
func gossipKey(seed byte, size int) []byte {
	k := make([]byte, size)
	for i := range k {
		k[i] = seed + byte(i)
	}
	return k
}

// keyRule is the rule of the gossip key tests: few enough hits that a
// fleet counts them as one exact limiter.
var keyRule = window.Rule{Name: "r", Count: 5, Window: time.Minute, Type: window.Fixed, SyncInterval: 100 * time.Millisecond}

// keyedNode is how a gossip key test starts a node.
type keyedNode struct {
	name      string
	keys      [][]byte
	plaintext GossipPlaintext
	join      []*Node
	// joinTimeout bounds Start's join; a node the fleet refuses serves
	// alone once it has passed.
	joinTimeout time.Duration
}

func startKeyed(t *testing.T, k keyedNode) *Node {
	t.Helper()
	var join []string
	for _, s := range k.join {
		join = append(join, s.GossipAddr())
	}
	if k.joinTimeout == 0 {
		k.joinTimeout = 5 * time.Second
	}
	nd, err := Start(context.Background(), Config{
		Name: k.name, Rules: []window.Rule{keyRule}, GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0", Join: join,
		JoinTimeout: k.joinTimeout, ShutdownTimeout: time.Second, Logger: testLogger(t),
		ReconnectInterval: 200 * time.Millisecond, BorrowTimeout: 2 * time.Second,
		SecretKeys: k.keys, GossipPlaintext: k.plaintext,
	})
	if err != nil {
		t.Fatalf("start %s: %v", k.name, err)
	}
	t.Cleanup(func() { nd.Close() })
	return nd
}

// startKeyedFleet starts n nodes holding keys, each joining the first,
// and waits until every one streams to every other.
func startKeyedFleet(t *testing.T, n int, keys [][]byte) []*Node {
	t.Helper()
	var fleet []*Node
	for i := range n {
		var join []*Node
		if i > 0 {
			join = fleet[:1]
		}
		fleet = append(fleet, startKeyed(t, keyedNode{name: fmt.Sprintf("node-%d", i), keys: keys, join: join}))
	}
	waitFor(t, patience, "every node of the fleet sees every other", peersAre(fleet, int64(n-1)))
	return fleet
}

// memberNames are the members gossip lists on nd, sorted.
func memberNames(nd *Node) []string {
	var out []string
	for _, c := range nd.members.members() {
		out = append(out, c.name)
	}
	slices.Sort(out)
	return out
}

func names(nodes []*Node) []string {
	var out []string
	for _, nd := range nodes {
		out = append(out, nd.Name())
	}
	slices.Sort(out)
	return out
}

// gossipRefusals is the gossip the nodes refused for its encryption, together.
func gossipRefusals(nodes ...*Node) int64 {
	var sum int64
	for _, nd := range nodes {
		sum += nd.Metrics().GossipRefusals
	}
	return sum
}

// checkFleet fails the test unless every node of fleet lists exactly the
// fleet as its members and streams to the others.
func checkFleet(t *testing.T, fleet []*Node) {
	t.Helper()
	want := names(fleet)
	for _, nd := range fleet {
		if got := memberNames(nd); !slices.Equal(got, want) {
			t.Errorf("%s lists members %q, want %q", nd.Name(), got, want)
		}
		if m := nd.Metrics(); m.Members != int64(len(fleet)) || m.Peers != int64(len(fleet)-1) {
			t.Errorf("%s: %d members and %d peers, want %d and %d", nd.Name(), m.Members, m.Peers, len(fleet), len(fleet)-1)
		}
	}
}

// everyoneAnswers waits until every node of fleet pings every other and
// hears its ack: each ping and ack is sealed with the sender's first key
// and opened with the receiver's keys, both ways for every pair. A slow
// ping under load is asked again; one refused for its key is counted in
// GossipRefusals, which the callers check.
func everyoneAnswers(t *testing.T, fleet []*Node, what string) {
	t.Helper()
	waitFor(t, patience, what, func() bool {
		for _, nd := range fleet {
			st := nd.MemberStates(context.Background())
			if st.Alive != len(fleet) || st.Suspect != 0 || st.Failed != 0 {
				return false
			}
		}
		return true
	})
}

// TestGossipKeysKeepIntrudersOut starts a fleet whose gossip is encrypted
// and has a node without keys, then one with another key, try to join it:
// the fleet refuses each (and each refuses the fleet's answers), neither
// becomes a member on any node, the fleet stays whole, and what an
// intruder admits is counted nowhere in the fleet.
func TestGossipKeysKeepIntrudersOut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster and two intruders")
	}
	fleet := startKeyedFleet(t, 3, [][]byte{gossipKey(1, 32)})
	for _, nd := range fleet {
		if got := nd.Metrics().GossipKeys; got != 1 {
			t.Fatalf("%s holds %d gossip keys, want 1", nd.Name(), got)
		}
	}
	intruders := []keyedNode{
		{name: "no-key"},
		{name: "other-key", keys: [][]byte{gossipKey(2, 32)}},
	}
	for _, k := range intruders {
		t.Run(k.name, func(t *testing.T) {
			before := gossipRefusals(fleet...)
			k.join, k.joinTimeout = fleet[:1], 500*time.Millisecond
			in := startKeyed(t, k)
			// Its join at start and two reconnects refused, both ways.
			waitFor(t, patience, k.name+"'s joins refused by the fleet and the fleet's answers by "+k.name, func() bool {
				return in.Metrics().GossipRefusals >= 3 && gossipRefusals(fleet...)-before >= 3
			})
			checkFleet(t, fleet)
			if got := memberNames(in); !slices.Equal(got, []string{k.name}) {
				t.Errorf("%s lists members %q, want itself alone", k.name, got)
			}
			if m := in.Metrics(); m.Members != 1 || m.Peers != 0 {
				t.Errorf("%s: %d members and %d peers, want 1 and 0", k.name, m.Members, m.Peers)
			}
			// The intruder spends the whole count of a key alone; the
			// fleet still admits all of it, and no more.
			key := "k-" + k.name
			for i := range keyRule.Count {
				if d, err := in.Allow(context.Background(), keyRule.Name, key, 1); err != nil || !d.Allowed {
					t.Fatalf("%s: hit %d: %+v, %v; want admitted", k.name, i+1, d, err)
				}
			}
			admitted := int64(0)
			for range keyRule.Count + 1 {
				d, err := fleet[1].Allow(context.Background(), keyRule.Name, key, 1)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
			if admitted != keyRule.Count {
				t.Errorf("the fleet admitted %d of %d hits after %s spent the count alone, want %d", admitted, keyRule.Count+1,
					k.name, keyRule.Count)
			}
		})
	}
}

// TestGossipKeyRotation rotates a fleet's gossip key in the three steps
// SetSecretKeys documents, one node at a time, with every node pinging
// every other after each node's change: no gossip is refused at any
// point, and every member stays alive. At the end a node holding only
// the new key joins, and one holding only the old key cannot.
func TestGossipKeyRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	oldKey, newKey := gossipKey(10, 32), gossipKey(20, 16) // AES-256 to AES-128
	fleet := startKeyedFleet(t, 3, [][]byte{oldKey})
	everyoneAnswers(t, fleet, "every node answers every other's ping before the rotation")
	steps := []struct {
		name string
		keys [][]byte
	}{
		{"add the new key", [][]byte{oldKey, newKey}},
		{"make it first", [][]byte{newKey, oldKey}},
		{"drop the old key", [][]byte{newKey}},
	}
	for s, step := range steps {
		for _, nd := range fleet {
			if err := nd.SetSecretKeys(step.keys); err != nil {
				t.Fatalf("step %d (%s): %s: %v", s+1, step.name, nd.Name(), err)
			}
			everyoneAnswers(t, fleet, fmt.Sprintf("every node answers every other's ping after %s did step %d (%s)",
				nd.Name(), s+1, step.name))
		}
		if n := gossipRefusals(fleet...); n != 0 {
			t.Fatalf("step %d (%s): the fleet refused %d gossip messages for their key", s+1, step.name, n)
		}
		checkFleet(t, fleet)
		for _, nd := range fleet {
			m := nd.Metrics()
			if m.GossipKeys != int64(len(step.keys)) || m.GossipKeyReloads != int64(s+1) || m.GossipKeyReloadErrors != 0 {
				t.Errorf("step %d (%s): %s holds %d keys after %d reloads (%d refused), want %d after %d",
					s+1, step.name, nd.Name(), m.GossipKeys, m.GossipKeyReloads, m.GossipKeyReloadErrors, len(step.keys), s+1)
			}
			if got := nd.members.keyring.GetPrimaryKey(); !bytes.Equal(got, step.keys[0]) {
				t.Errorf("step %d (%s): %s encrypts with key %s, want %s", s+1, step.name, nd.Name(), keyID(got), keyID(step.keys[0]))
			}
		}
	}
	// The same keys again change nothing.
	if err := fleet[0].SetSecretKeys([][]byte{newKey}); err != nil {
		t.Fatal(err)
	}
	if got := fleet[0].Metrics().GossipKeyReloads; got != int64(len(steps)) {
		t.Errorf("reloads after setting the same keys: %d, want %d", got, len(steps))
	}

	newcomer := startKeyed(t, keyedNode{name: "new-key", keys: [][]byte{newKey}, join: fleet[2:]})
	fleet = append(fleet, newcomer)
	waitFor(t, patience, "the node with the new key joins", peersAre(fleet, int64(len(fleet)-1)))
	checkFleet(t, fleet)

	before := gossipRefusals(fleet...)
	stale := startKeyed(t, keyedNode{name: "old-key", keys: [][]byte{oldKey}, join: fleet[:1], joinTimeout: 500 * time.Millisecond})
	waitFor(t, patience, "the node with the old key refused", func() bool {
		return stale.Metrics().GossipRefusals >= 3 && gossipRefusals(fleet...)-before >= 3
	})
	checkFleet(t, fleet)
	if got := memberNames(stale); !slices.Equal(got, []string{"old-key"}) {
		t.Errorf("the node with the old key lists members %q, want itself alone", got)
	}
}

// TestGossipPlaintextSteps joins pairs of nodes a step apart on the way
// into gossip encryption (no keys; keys sending plaintext; keys accepting
// plaintext; keys refusing it): each step talks to the one before, and a
// node two steps on does not.
func TestGossipPlaintextSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2-node clusters")
	}
	key := [][]byte{gossipKey(30, 24)}
	none := keyedNode{}
	send := keyedNode{keys: key, plaintext: PlaintextSent}
	accept := keyedNode{keys: key, plaintext: PlaintextAccepted}
	refuse := keyedNode{keys: key}
	tests := []struct {
		name         string
		seed, joiner keyedNode
		joins        bool
	}{
		{"no keys and send", none, send, true},
		{"send and no keys", send, none, true},
		{"send and accept", send, accept, true},
		{"accept and send", accept, send, true},
		{"accept and refuse", accept, refuse, true},
		{"refuse and accept", refuse, accept, true},
		{"no keys and accept", none, accept, false},
		{"send and refuse", send, refuse, false},
		{"refuse and send", refuse, send, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.seed.name = "seed"
			seed := startKeyed(t, tt.seed)
			tt.joiner.name, tt.joiner.join = "joiner", []*Node{seed}
			if !tt.joins {
				tt.joiner.joinTimeout = 500 * time.Millisecond
			}
			joiner := startKeyed(t, tt.joiner)
			pair := []*Node{seed, joiner}
			if tt.joins {
				waitFor(t, patience, "the two see each other", peersAre(pair, 1))
				everyoneAnswers(t, pair, "each answers the other's ping")
				if n := gossipRefusals(pair...); n != 0 {
					t.Errorf("%d gossip messages refused for their encryption", n)
				}
				return
			}
			waitFor(t, patience, "the joins refused", func() bool { return gossipRefusals(pair...) >= 3 })
			// The seed may have taken the joiner in before the joiner
			// refused its answer; the joiner never takes the seed.
			if got := memberNames(joiner); !slices.Equal(got, []string{"joiner"}) {
				t.Errorf("the joiner lists members %q, want itself alone", got)
			}
		})
	}
}

// TestGossipKeyErrors checks the keys Start and SetSecretKeys refuse, and
// that a refused change leaves the keys as they were.
func TestGossipKeyErrors(t *testing.T) {
	k16, k24, k32 := gossipKey(1, 16), gossipKey(2, 24), gossipKey(3, 32)
	many := make([][]byte, MaxSecretKeys+1)
	for i := range many {
		many[i] = gossipKey(byte(40+i), 16)
	}
	startTests := []struct {
		name      string
		keys      [][]byte
		plaintext GossipPlaintext
		want      string // the whole error; empty for none
	}{
		{"each size", [][]byte{k16, k24, k32}, PlaintextRefused, ""},
		{"too short", [][]byte{k16, gossipKey(4, 20)}, PlaintextRefused, "sluice: SecretKeys[1]: 20 bytes, want 16, 24 or 32"},
		{"too long", [][]byte{gossipKey(4, 64)}, PlaintextRefused, "sluice: SecretKeys[0]: 64 bytes, want 16, 24 or 32"},
		{"empty key", [][]byte{k16, nil}, PlaintextRefused, "sluice: SecretKeys[1]: 0 bytes, want 16, 24 or 32"},
		{"twice", [][]byte{k16, k32, k16}, PlaintextRefused, "sluice: SecretKeys[2]: the same key as SecretKeys[0]"},
		{"too many", many, PlaintextRefused, "sluice: SecretKeys: 9 keys, want at most 8 (a rotation needs 2)"},
		{"plaintext without keys", nil, PlaintextAccepted,
			"sluice: GossipPlaintext accept needs SecretKeys: it says what a node with keys does with plaintext gossip"},
		{"no such plaintext", [][]byte{k16}, GossipPlaintext(7),
			"sluice: GossipPlaintext must be PlaintextRefused, PlaintextAccepted or PlaintextSent, got 7"},
	}
	for _, tt := range startTests {
		t.Run("Start "+tt.name, func(t *testing.T) {
			nd, err := Start(context.Background(), Config{
				Name: "n", Rules: []window.Rule{keyRule}, GRPCAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0",
				Logger: testLogger(t), SecretKeys: tt.keys, GossipPlaintext: tt.plaintext,
			})
			if err == nil {
				defer nd.Close()
				if tt.want != "" {
					t.Fatalf("started, want error %q", tt.want)
				}
				if got := nd.Metrics().GossipKeys; got != int64(len(tt.keys)) {
					t.Errorf("holds %d keys, want %d", got, len(tt.keys))
				}
				return
			}
			if err.Error() != tt.want {
				t.Fatalf("error\n got: %v\nwant: %s", err, tt.want)
			}
		})
	}

	keyed := startKeyed(t, keyedNode{name: "keyed", keys: [][]byte{k16}})
	plain := startKeyed(t, keyedNode{name: "plain"})
	alone, err := Start(context.Background(), Config{Name: "alone", Rules: []window.Rule{keyRule}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	setTests := []struct {
		name string
		nd   *Node
		keys [][]byte
		want error  // matched with errors.Is, or nil
		text string // a part of the error's text
	}{
		{"wrong size", keyed, [][]byte{k16, gossipKey(5, 31)}, nil, "SecretKeys[1]: 31 bytes, want 16, 24 or 32"},
		{"too many", keyed, many, nil, "SecretKeys: 9 keys, want at most 8"},
		{"none on a keyed node", keyed, nil, errKeysNeedStop, "rolling restarts"},
		{"keys on a plaintext node", plain, [][]byte{k16}, errKeysNeedStart, "rolling restarts"},
		{"none on a plaintext node", plain, nil, nil, ""},
		{"keys on a node without gossip", alone, [][]byte{k32}, nil, ""},
		{"wrong size on a node without gossip", alone, [][]byte{gossipKey(6, 8)}, nil, "SecretKeys[0]: 8 bytes"},
	}
	for _, tt := range setTests {
		t.Run("SetSecretKeys "+tt.name, func(t *testing.T) {
			before := tt.nd.Metrics()
			err := tt.nd.SetSecretKeys(tt.keys)
			after := tt.nd.Metrics()
			if tt.text == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				if after.GossipKeyReloadErrors != before.GossipKeyReloadErrors || after.GossipKeyReloads != before.GossipKeyReloads {
					t.Errorf("reloads %d (%d refused), want %d (%d): nothing changed", after.GossipKeyReloads,
						after.GossipKeyReloadErrors, before.GossipKeyReloads, before.GossipKeyReloadErrors)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.text) || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.text)
			}
			if after.GossipKeyReloadErrors != before.GossipKeyReloadErrors+1 {
				t.Errorf("refused reloads %d, want %d", after.GossipKeyReloadErrors, before.GossipKeyReloadErrors+1)
			}
			if after.GossipKeys != before.GossipKeys {
				t.Errorf("holds %d keys after a refused change, want %d", after.GossipKeys, before.GossipKeys)
			}
		})
	}
	if got := keyed.members.keyring.GetKeys(); len(got) != 1 || !bytes.Equal(got[0], k16) {
		t.Errorf("after the refused changes the keyring holds %d keys, want the one it started with", len(got))
	}
}

// TestDropKeysKeepsOrder drops keys from the middle of a keyring, which
// dropKeys does from its end: the keys kept are all there, the first
// still first.
func TestDropKeysKeepsOrder(t *testing.T) {
	a, b, c, d := gossipKey(1, 16), gossipKey(2, 16), gossipKey(3, 16), gossipKey(4, 16)
	tests := []struct {
		name       string
		ring, keep [][]byte
	}{
		{"none", [][]byte{a, b, c}, [][]byte{a, b, c}},
		{"the last", [][]byte{a, b, c}, [][]byte{a, b}},
		{"from the middle", [][]byte{a, b, c, d}, [][]byte{a, c, d}},
		{"all but the first", [][]byte{a, b, c, d}, [][]byte{a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kr, err := memberlist.NewKeyring(tt.ring[1:], tt.ring[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := dropKeys(kr, tt.keep); err != nil {
				t.Fatal(err)
			}
			got := kr.GetKeys()
			if !sameKeys(got, tt.keep) {
				t.Errorf("keyring holds %d keys, first %s; want %d, first %s", len(got), keyID(got[0]), len(tt.keep), keyID(tt.keep[0]))
			}
		})
	}
}

// TestSecretKeysAreCopied changes the caller's key slices after Start and
// after SetSecretKeys: the node's keyring keeps the keys as they were.
func TestSecretKeysAreCopied(t *testing.T) {
	first, second := gossipKey(50, 16), gossipKey(60, 16)
	mine := [][]byte{bytes.Clone(first)}
	nd := startKeyed(t, keyedNode{name: "copies", keys: mine})
	mine[0][0]++
	mine = [][]byte{bytes.Clone(second), bytes.Clone(first)}
	if err := nd.SetSecretKeys(mine); err != nil {
		t.Fatal(err)
	}
	mine[0][0]++
	mine[1][0]++
	got := nd.members.keyring.GetKeys()
	if !sameKeys(got, [][]byte{second, first}) {
		t.Errorf("the keyring holds %d keys, first %s; want 2, first %s: it shares the caller's slices", len(got), keyID(got[0]), keyID(second))
	}
}
