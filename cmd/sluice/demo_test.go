package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/chaos/sim"
	"github.com/sluicehq/sluice/window"
)

// A short demo charts both phases live and sums each up.
func TestDemoBothPhases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two 2-node clusters for 2 s each")
	}
	code, stdout, stderr := runCmd(context.Background(), "demo", "--duration", "4s", "--nodes", "2",
		"--rate", "200", "--limit", "100", "--sync", "100ms")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"sluice demo: 2 nodes", "limit 100 per 1s fixed", "2s classic, then 2s owner",
		"   0s classic   n0 ", "   1s classic   n0 ", "   2s owner     n0 ", "   3s owner     n0 ",
		"| total ", " / limit 100 (",
		"  window   classic admitted    error     owner admitted    error\n",
		"\n  classic  median window ", "\n  owner    median window ", "cumulative",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "stopped early") {
		t.Errorf("a full run says it stopped early:\n%s", stdout)
	}
}

// Ctrl-C before the demo starts still exits cleanly and says nothing was
// measured.
func TestDemoCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, stdout, stderr := runCmd(ctx, "demo", "--duration", "2s")
	if code != 0 || !strings.Contains(stdout, "nothing measured") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and \"nothing measured\"", code, stdout, stderr)
	}
}

func TestDemoUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"zero duration", []string{"--duration", "0s"}, "sluice demo: --duration must be positive, got 0s\n"},
		{"short duration", []string{"--duration", "1s"}, "sluice demo: --duration 1s is too short: each phase needs at least one --window (1s)\n"},
		{"bad type", []string{"--type", "round"}, "sluice demo: --type: "},
		{"no nodes", []string{"--nodes", "0"}, "sluice demo: nodes must be in [1, 1024], got 0\n"},
		{"too many nodes", []string{"--nodes", "100"}, "sluice demo: --nodes must be in [1, 64] for an in-process cluster, got 100\n"},
		{"bad rate", []string{"--rate", "0"}, "sluice demo: rate must be in (0, 1e7] requests/s, got 0\n"},
		{"bad limit", []string{"--limit", "0"}, "sluice demo: --limit: "},
		{"strict", []string{"--sync", "-1ns"}, "sluice demo: --sync must be > 0: the demo compares the batched allocation policies\n"},
		{"sync past window", []string{"--sync", "1s"}, "sluice demo: --sync: "},
		{"stray", []string{"x"}, "sluice demo: unexpected argument \"x\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(context.Background(), append([]string{"demo"}, tt.args...)...)
			if code != 2 || stdout != "" || !strings.HasPrefix(stderr, tt.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2, stderr starting %q", code, stdout, stderr, tt.want)
			}
		})
	}
}

func TestLiveLine(t *testing.T) {
	c := sim.Defaults()
	c.Nodes, c.Limit, c.Window = 3, 500, time.Second
	got := liveLine(2*time.Second, window.Classic, sim.SecondStat{StartS: 1, Admitted: 578, PerNode: []int64{190, 185, 203}}, &c)
	want := "   3s classic   n0 ██████▉    190 n1 ██████▋    185 n2 ███████▎   203  | total 578 / limit 500 (+15.6%)\n"
	if got != want {
		t.Errorf("liveLine =\n%q, want\n%q", got, want)
	}
	c.Window = 10 * time.Second
	c.Limit = 1000
	got = liveLine(0, window.Adaptive, sim.SecondStat{Admitted: 100, PerNode: []int64{50, 50, 0}}, &c)
	if !strings.Contains(got, "| total 100 / limit/s 100 (+0.0%)") || !strings.Contains(got, "n0 █████████   50 n1 █████████   50 n2              0") {
		t.Errorf("liveLine = %q", got)
	}
}

func TestBar(t *testing.T) {
	tests := []struct {
		v, share float64
		want     string
	}{
		{0, 100, "         "},
		{100, 100, "██████   "},
		{50, 100, "███      "},
		{1000, 100, "█████████"},
		{1, 0, "         "},
	}
	for _, tt := range tests {
		if got := bar(tt.v, tt.share); got != tt.want {
			t.Errorf("bar(%g, %g) = %q, want %q", tt.v, tt.share, got, tt.want)
		}
	}
}
