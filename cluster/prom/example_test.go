package prom_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/prom"
	"github.com/sluicehq/sluice/window"
)

// A program that embeds a node registers its collector in a registry of
// its own, beside its other metrics, and serves that registry with
// promhttp.HandlerFor. Here the registry is gathered directly, after three
// checks of a rule that admits two.
func ExampleNewCollector() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules:  []window.Rule{{Name: "api", Count: 2, Window: time.Minute}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(prom.NewCollector(node))
	// http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	for range 3 {
		if _, err := node.Allow(ctx, "api", "user:42", 1); err != nil {
			log.Fatal(err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "sluice_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			fmt.Printf("rule=%s path=%s result=%s %v\n", labels["rule"], labels["path"], labels["result"], m.GetCounter().GetValue())
		}
	}
	// Output:
	// rule=api path=local result=allowed 2
	// rule=api path=local result=error 0
	// rule=api path=local result=refused 1
	// rule=api path=local result=shadow_refused 0
}
