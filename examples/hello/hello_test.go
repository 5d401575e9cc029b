package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoRaftNorYAML lists the packages this program links: an
// embedding with batched rules only must not pay for strict mode's Raft,
// the agent's config file parser, Envoy's API types or a Prometheus client
// (the node counts its metrics without one; package cluster/prom exports
// them), in binary size or start-up.
func TestLinksNoRaftNorYAML(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the packages with")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, dep := range deps {
		for _, banned := range []string{
			"github.com/hashicorp/raft",
			"github.com/hashicorp/go-hclog",
			"github.com/sluicehq/sluice/cluster/strict",
			"github.com/sluicehq/sluice/store/raftstore",
			"github.com/sluicehq/sluice/cluster/configfile",
			"github.com/sluicehq/sluice/cluster/envoyrls",
			"github.com/envoyproxy/go-control-plane",
			"go.yaml.in/yaml",
			"github.com/sluicehq/sluice/cluster/prom",
			"github.com/prometheus",
		} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("hello links %s", dep)
			}
		}
	}
	if len(deps) == 0 || !strings.Contains(string(out), "github.com/sluicehq/sluice/cluster\n") {
		t.Fatalf("go list shows no cluster among %d packages:\n%s", len(deps), out)
	}
}
