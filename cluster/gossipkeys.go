package cluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/memberlist"
)

// MaxSecretKeys is the most gossip keys a node holds (Config.SecretKeys).
// memberlist tries each key in turn on a message the first does not
// open, so every key costs the messages it does not open; a rotation
// needs two.
const MaxSecretKeys = 8

// CheckSecretKey reports whether key can encrypt gossip: 16, 24 or 32 bytes,
// for AES-128, AES-192 or AES-256. name names the key in the error, as
// SecretKeys[1] (or, in the agent's config file, secret_keys[1]).
func CheckSecretKey(name string, key []byte) error {
	switch len(key) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("%s: %d bytes, want 16, 24 or 32", name, len(key))
}

// checkSecretKeys checks a list of gossip keys: at most MaxSecretKeys,
// each of a size AES takes, none twice. field names the list in errors.
func checkSecretKeys(field string, keys [][]byte) error {
	if len(keys) > MaxSecretKeys {
		return fmt.Errorf("%s: %d keys, want at most %d (a rotation needs 2)", field, len(keys), MaxSecretKeys)
	}
	for i, k := range keys {
		if err := CheckSecretKey(fmt.Sprintf("%s[%d]", field, i), k); err != nil {
			return err
		}
		if j := slices.IndexFunc(keys[:i], func(o []byte) bool { return bytes.Equal(o, k) }); j >= 0 {
			return fmt.Errorf("%s[%d]: the same key as %s[%d]", field, i, field, j)
		}
	}
	return nil
}

// GossipPlaintext says what a node whose gossip is encrypted
// (Config.SecretKeys) does with gossip that is not. The default refuses it;
// the other two are the steps by which a running fleet moves into gossip
// encryption, or out of it, one rolling restart at a time, since a node
// with keys and the default cannot talk to one without. Into encryption:
// restart every node with the keys and PlaintextSent, then every node with
// PlaintextAccepted, then every node with neither; out of it, the same
// steps the other way round, and then without keys.
type GossipPlaintext uint8

const (
	// PlaintextRefused, the default, sends encrypted gossip and refuses
	// gossip that is not encrypted with one of the node's keys.
	PlaintextRefused GossipPlaintext = iota
	// PlaintextAccepted sends encrypted gossip and accepts plaintext too,
	// from nodes still sending it.
	PlaintextAccepted
	// PlaintextSent sends plaintext gossip, which nodes without keys
	// read, and accepts both.
	PlaintextSent
)

// String returns the config file's spelling of p: refuse, accept or send.
func (p GossipPlaintext) String() string {
	switch p {
	case PlaintextRefused:
		return "refuse"
	case PlaintextAccepted:
		return "accept"
	case PlaintextSent:
		return "send"
	}
	return fmt.Sprintf("GossipPlaintext(%d)", uint8(p))
}

// ParseGossipPlaintext reads the config file's spelling of a
// GossipPlaintext: refuse (or empty, the default), accept or send.
func ParseGossipPlaintext(s string) (GossipPlaintext, error) {
	switch s {
	case "refuse", "":
		return PlaintextRefused, nil
	case "accept":
		return PlaintextAccepted, nil
	case "send":
		return PlaintextSent, nil
	}
	return 0, fmt.Errorf("gossip_plaintext must be refuse, accept or send, got %q", s)
}

// checkGossipKeys checks Config.SecretKeys and Config.GossipPlaintext.
func (cfg *Config) checkGossipKeys() error {
	if err := checkSecretKeys("SecretKeys", cfg.SecretKeys); err != nil {
		return fmt.Errorf("sluice: %w", err)
	}
	switch p := cfg.GossipPlaintext; {
	case p > PlaintextSent:
		return fmt.Errorf("sluice: GossipPlaintext must be PlaintextRefused, PlaintextAccepted or PlaintextSent, got %d", uint8(p))
	case p != PlaintextRefused && len(cfg.SecretKeys) == 0:
		return fmt.Errorf("sluice: GossipPlaintext %s needs SecretKeys: it says what a node with keys does with plaintext gossip", p)
	}
	return nil
}

// keyring is the memberlist keyring a node starts with, or nil without
// SecretKeys. Memberlist reads the flags its Config gets at start alone, so
// only the keys change afterwards.
func (cfg *Config) keyring(mc *memberlist.Config) error {
	if len(cfg.SecretKeys) == 0 {
		return nil
	}
	// Copies: the caller's slices are theirs to change.
	keys := cloneKeys(cfg.SecretKeys)
	kr, err := memberlist.NewKeyring(keys[1:], keys[0])
	if err != nil {
		return fmt.Errorf("sluice: SecretKeys: %w", err)
	}
	mc.Keyring = kr
	mc.GossipVerifyIncoming = cfg.GossipPlaintext == PlaintextRefused
	mc.GossipVerifyOutgoing = cfg.GossipPlaintext != PlaintextSent
	return nil
}

func cloneKeys(keys [][]byte) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = bytes.Clone(k)
	}
	return out
}

func hasKey(keys [][]byte, k []byte) bool {
	return slices.ContainsFunc(keys, func(o []byte) bool { return bytes.Equal(o, k) })
}

// sameKeys reports whether two key lists hold the same keys with the same
// first (the one that encrypts), in whatever order the others are.
func sameKeys(a, b [][]byte) bool {
	if len(a) != len(b) || len(a) > 0 && !bytes.Equal(a[0], b[0]) {
		return false
	}
	for _, k := range a {
		if !hasKey(b, k) {
			return false
		}
	}
	return true
}

// keyID names a key in logs without giving it away: the start of its
// SHA-256, which is as hard to invert as the key is to guess.
func keyID(k []byte) string {
	sum := sha256.Sum256(k)
	return hex.EncodeToString(sum[:4])
}

// SetSecretKeys replaces the keys the node's gossip is encrypted with while
// it runs: the first encrypts what the node sends, and every one opens
// what it receives (Config.SecretKeys, whose terms the list must meet).
// The agent calls it with its config file's keys on SIGHUP. It installs
// the keys not yet held first, then makes the first the one that
// encrypts, then drops the keys no longer listed, so that at no step does
// the node send with a key it did not already take, or drop the one it
// sends with.
//
// A rotation takes three calls on every node of the fleet, each finished
// on every node before the next begins: add the new key after the old
// ([old, new]); make it first ([new, old]); drop the old ([new]). Each
// node then reads what every other sends throughout.
//
// Gossip encryption itself is set at start: a node started without keys
// refuses keys here, and one started with keys refuses an empty list,
// since a fleet moves between the two in rolling restarts
// (GossipPlaintext). A node without gossip checks the keys and has no
// use for them. Each call that changes the keys, or is refused, counts
// in Metrics.GossipKeyReloads or GossipKeyReloadErrors.
func (n *Node) SetSecretKeys(keys [][]byte) error {
	changed, err := n.setSecretKeys(keys)
	switch {
	case err != nil:
		n.metrics.GossipKeyReloadErrors.Add(1)
		return err
	case changed:
		n.metrics.GossipKeyReloads.Add(1)
	}
	return nil
}

// SecretKeysFailed counts a change of the gossip keys that failed before
// it could call SetSecretKeys, in Metrics.GossipKeyReloadErrors: the agent
// calls it when the secret_keys_file it rereads on SIGHUP cannot be read,
// so that the metric counts every change an operator asked for and did
// not get.
func (n *Node) SecretKeysFailed() { n.metrics.GossipKeyReloadErrors.Add(1) }

func (n *Node) setSecretKeys(keys [][]byte) (bool, error) {
	if err := checkSecretKeys("SecretKeys", keys); err != nil {
		return false, fmt.Errorf("sluice: %w", err)
	}
	if n.members == nil {
		return false, nil
	}
	return n.members.setKeys(keys)
}

// Errors of SetSecretKeys that ask for a restart.
var (
	errKeysNeedStart = errors.New("sluice: SetSecretKeys: gossip encryption was off when the node started; " +
		"a running fleet turns it on in rolling restarts (GossipPlaintext)")
	errKeysNeedStop = errors.New("sluice: SetSecretKeys: no keys: a running fleet turns gossip encryption off " +
		"in rolling restarts (GossipPlaintext); a rotation keeps at least the key that encrypts")
)

// setKeys installs keys in the live keyring (see Node.SetSecretKeys) and
// reports whether they differ from those it held.
func (m *membership) setKeys(keys [][]byte) (bool, error) {
	m.keysMu.Lock()
	defer m.keysMu.Unlock()
	kr := m.keyring
	on := kr != nil && len(kr.GetKeys()) > 0
	switch {
	case !on && len(keys) == 0:
		return false, nil
	case !on:
		return false, errKeysNeedStart
	case len(keys) == 0:
		return false, errKeysNeedStop
	}
	// The keyring's own slices are read by memberlist without its lock:
	// this reads copies of the list, and never changes a key in place.
	before := slices.Clone(kr.GetKeys())
	for _, k := range keys {
		if !hasKey(before, k) {
			if err := kr.AddKey(bytes.Clone(k)); err != nil {
				return false, fmt.Errorf("sluice: SetSecretKeys: %w", err)
			}
		}
	}
	if !bytes.Equal(kr.GetPrimaryKey(), keys[0]) {
		// The keyring's own copy: UseKey keeps the slice it is given.
		ring := kr.GetKeys()
		i := slices.IndexFunc(ring, func(k []byte) bool { return bytes.Equal(k, keys[0]) })
		if i < 0 {
			return false, errors.New("sluice: SetSecretKeys: the first key did not reach the keyring")
		}
		if err := kr.UseKey(ring[i]); err != nil {
			return false, fmt.Errorf("sluice: SetSecretKeys: %w", err)
		}
	}
	if err := dropKeys(kr, keys); err != nil {
		return false, fmt.Errorf("sluice: SetSecretKeys: %w", err)
	}
	after := slices.Clone(kr.GetKeys())
	m.n.metrics.GossipKeys.Store(int64(len(after)))
	changed := !sameKeys(before, after)
	if changed {
		m.n.log.Info("gossip keys installed", "keys", len(after), "primary", keyID(after[0]),
			"primary_changed", !bytes.Equal(before[0], after[0]))
	}
	return changed, nil
}

// dropKeys removes from kr, whose first key is keep[0], the keys keep does
// not hold. memberlist's RemoveKey shifts the keys after the one it
// removes within the list it handed out, under readers decrypting with
// that list; removing the last key shifts none. So the keys from the
// first to drop onwards come off from the end, and those among them that
// stay go back on, a moment later. In a rotation the key dropped is the
// last, and none goes back.
func dropKeys(kr *memberlist.Keyring, keep [][]byte) error {
	ring := slices.Clone(kr.GetKeys())
	first := slices.IndexFunc(ring, func(k []byte) bool { return !hasKey(keep, k) })
	if first < 0 {
		return nil
	}
	if first == 0 {
		return errors.New("the key that encrypts is not among the keys to keep") // setKeys made it keep[0]
	}
	for i := len(ring) - 1; i >= first; i-- {
		if err := kr.RemoveKey(ring[i]); err != nil {
			return err
		}
	}
	for _, k := range ring[first:] {
		if hasKey(keep, k) {
			if err := kr.AddKey(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// gossipRefusal reports whether a line memberlist logged, or an error its
// Join returned, is gossip refused for its encryption: plaintext where
// encryption is required, encrypted with no key this node holds, or
// encrypted to a node without keys. memberlist says so only in words.
func gossipRefusal(text string) bool {
	for _, s := range []string{
		"Decrypt packet failed",
		"no installed keys could decrypt the message",
		"encryption is configured but remote state is not encrypted",
		"remote state is encrypted and encryption is not configured",
	} {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// joinRefused counts a Join whose seeds refused this node's gossip, or
// whose answers this node refused, for their encryption, and says so; it
// reports whether err was one.
func (m *membership) joinRefused(err error, seeds []string) bool {
	if err == nil || !gossipRefusal(err.Error()) {
		return false
	}
	m.n.metrics.GossipRefusals.Add(1)
	m.n.log.Warn("gossip with a seed or member refused for its encryption: the two hold no key in common, "+
		"or one encrypts and the other does not (SecretKeys)", "tried", seeds, "err", err)
	return true
}

// logKeys says at start how the node's gossip is secured, and sets the
// keys gauge.
func (m *membership) logKeys(mc *memberlist.Config) {
	n := m.n
	if m.keyring == nil || len(m.keyring.GetKeys()) == 0 {
		if !isLoopback(n.cfg.BindAddr) {
			n.log.Warn("gossip is not encrypted: whoever reaches BindAddr can read the fleet's membership and join it; set SecretKeys",
				"bind_addr", n.cfg.BindAddr)
		}
		return
	}
	keys := m.keyring.GetKeys()
	n.metrics.GossipKeys.Store(int64(len(keys)))
	plaintext := PlaintextRefused
	switch {
	case !mc.GossipVerifyOutgoing:
		plaintext = PlaintextSent
	case !mc.GossipVerifyIncoming:
		plaintext = PlaintextAccepted
	}
	n.log.Info("gossip encrypted", "keys", len(keys), "primary", keyID(keys[0]), "plaintext", plaintext.String())
}
