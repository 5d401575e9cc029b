package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// A reload (what SIGHUP triggers) takes the file's new rules; a file that no
// longer parses leaves the running rules alone.
func TestAgentReloadsRules(t *testing.T) {
	const before = `rules:
  - name: api
    count: 5
    time_window: 10
    sync_interval: 0.2
`
	path := writeFile(t, "sluice.yaml", before)
	a := startTestAgentArgs(t, nil, "--config", path, "--grpc-addr", "127.0.0.1:0")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	count := func() int64 { return a.node.Rules()[0].Count }

	tests := []struct {
		name string
		file string
		want int64
	}{
		{"new count", "rules:\n  - name: api\n    count: 7\n    time_window: 10\n    sync_interval: 0.2\n", 7},
		{"broken file", "rules:\n  - name: api\n    count: 0\n    time_window: 10\n    sync_interval: 0.2\n", 7},
		{"to strict", "rules:\n  - name: api\n    count: 9\n    time_window: 10\n    sync_interval: -1\n", 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			a.reload(context.Background(), path, log)
			if got := count(); got != tt.want {
				t.Fatalf("count after reload %d, want %d", got, tt.want)
			}
		})
	}
	// The strict group started by the reload elects itself and serves.
	waitUntil(t, patience, "a strict decision after the reload", func() (bool, string) {
		d, err := a.node.Allow(context.Background(), "api", "k", 0)
		switch {
		case errors.Is(err, cluster.ErrOutcomeUnknown):
			// The new group's first entry did not commit within the check's
			// deadline: it is still settling, so ask again.
		case err != nil:
			t.Fatal(err)
		}
		return err == nil && d.Path == window.PathStrict, fmt.Sprintf("%+v, %v", d, err)
	})
}

// A reload (what SIGHUP triggers) rotates the gossip keys of the config
// file, from secret_keys or a secret_keys_file read again, in the three
// steps the README gives; keys that cannot be read leave those in use. At
// the end an agent holding only the new key joins.
func TestAgentReloadRotatesGossipKeys(t *testing.T) {
	const (
		oldKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes
		newKey = "QUJDREVGR0hJSktMTU5PUA=="                     // 16 bytes
		rules  = "rules:\n  - {name: api, count: 5, time_window: 10}\n"
	)
	keysFile := writeFile(t, "gossip.keys", newKey+"\n")
	path := writeFile(t, "sluice.yaml", "name: rotating\nsecret_keys: ["+oldKey+"]\n"+rules)
	a := startTestAgentArgs(t, nil, "--config", path, "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if got := a.node.Metrics().GossipKeys; got != 1 {
		t.Fatalf("started with %d gossip keys, want 1", got)
	}
	tests := []struct {
		name         string
		file         string
		keysFile     string // written to gossip.keys first, when not empty
		keys, reload int64  // keys held and reloads taken after it
		refused      int64  // reloads refused after it
	}{
		{"add the new key", "secret_keys: [" + oldKey + ", " + newKey + "]\n", "", 2, 1, 0},
		{"the same again", "secret_keys: [" + oldKey + ", " + newKey + "]\n", "", 2, 1, 0},
		{"make it first", "secret_keys: [" + newKey + ", " + oldKey + "]\n", "", 2, 2, 0},
		{"a keys file that is not base64", "secret_keys_file: " + keysFile + "\n", "%%%\n", 2, 2, 1},
		{"no keys", "", "", 2, 2, 2},
		{"drop the old key, from the keys file", "secret_keys_file: " + keysFile + "\n", newKey + "\n", 1, 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.keysFile != "" {
				if err := os.WriteFile(keysFile, []byte(tt.keysFile), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(path, []byte("name: rotating\n"+tt.file+rules), 0o644); err != nil {
				t.Fatal(err)
			}
			a.reload(context.Background(), path, log)
			m := a.node.Metrics()
			if m.GossipKeys != tt.keys || m.GossipKeyReloads != tt.reload || m.GossipKeyReloadErrors != tt.refused {
				t.Fatalf("%d keys after %d reloads (%d refused), want %d after %d (%d)", m.GossipKeys, m.GossipKeyReloads,
					m.GossipKeyReloadErrors, tt.keys, tt.reload, tt.refused)
			}
			if m.ReloadErrors != 0 {
				t.Errorf("%d rule reloads failed, want none: the rules reload whatever becomes of the keys", m.ReloadErrors)
			}
		})
	}
	other := startTestAgentArgs(t, nil, "--config", writeFile(t, "other.yaml", "name: newcomer\nsecret_keys: ["+newKey+"]\n"+rules),
		"--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--join", a.GossipAddr())
	waitUntil(t, patience, "an agent with only the new key joins", func() (bool, string) {
		ma, mo := a.node.Metrics(), other.node.Metrics()
		return ma.Peers == 1 && mo.Peers == 1, fmt.Sprintf("peers %d and %d", ma.Peers, mo.Peers)
	})
	if n := a.node.Metrics().GossipRefusals + other.node.Metrics().GossipRefusals; n != 0 {
		t.Errorf("%d gossip messages refused for their encryption", n)
	}
}
