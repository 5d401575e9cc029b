package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/window"
)

func TestTry(t *testing.T) {
	type sc struct {
		name  string
		limit int64
		w     time.Duration
		typ   window.Type
		d     time.Duration
		mut   func(*Config)
	}
	none := func(*Config) {}
	for _, s := range []sc{
		{"500/1s fixed", 500, time.Second, window.Fixed, 30 * time.Second, none},
		{"500/1s sliding", 500, time.Second, window.Sliding, 30 * time.Second, none},
		{"1000/10s fixed", 1000, 10 * time.Second, window.Fixed, 90 * time.Second, none},
		{"1000/10s sliding", 1000, 10 * time.Second, window.Sliding, 90 * time.Second, none},
		{"8n fixed", 500, time.Second, window.Fixed, 30 * time.Second, func(c *Config) { c.Nodes, c.Rate = 8, 4000 }},
		{"8n sliding", 500, time.Second, window.Sliding, 30 * time.Second, func(c *Config) { c.Nodes, c.Rate = 8, 4000 }},
		{"skew 1000/10s fixed", 1000, 10 * time.Second, window.Fixed, 90 * time.Second, func(c *Config) { c.Skewed, c.Skew = true, 0.9 }},
		{"skew 1000/10s sliding", 1000, 10 * time.Second, window.Sliding, 90 * time.Second, func(c *Config) { c.Skewed, c.Skew = true, 0.9 }},
		{"skew 500/1s fixed", 500, time.Second, window.Fixed, 30 * time.Second, func(c *Config) { c.Skewed, c.Skew = true, 0.9 }},
		{"skew 500/1s sliding", 500, time.Second, window.Sliding, 30 * time.Second, func(c *Config) { c.Skewed, c.Skew = true, 0.9 }},
		{"shift 1000/10s fixed", 1000, 10 * time.Second, window.Fixed, 90 * time.Second, func(c *Config) { c.Shift = 10 * time.Second }},
		{"shift 1000/10s sliding", 1000, 10 * time.Second, window.Sliding, 90 * time.Second, func(c *Config) { c.Shift = 10 * time.Second }},
		{"shift 500/1s fixed", 500, time.Second, window.Fixed, 30 * time.Second, func(c *Config) { c.Shift = 10 * time.Second }},
		{"shift 500/1s sliding", 500, time.Second, window.Sliding, 30 * time.Second, func(c *Config) { c.Shift = 10 * time.Second }},
		{"half fixed", 500, time.Second, window.Fixed, 30 * time.Second, func(c *Config) { c.Rate = 250 }},
		{"half sliding", 500, time.Second, window.Sliding, 30 * time.Second, func(c *Config) { c.Rate = 250 }},
		{"half skew sliding", 500, time.Second, window.Sliding, 30 * time.Second, func(c *Config) { c.Rate = 250; c.Skewed, c.Skew = true, 0.9 }},
		{"half skew fixed", 500, time.Second, window.Fixed, 30 * time.Second, func(c *Config) { c.Rate = 250; c.Skewed, c.Skew = true, 0.9 }},
	} {
		c := Defaults()
		c.Limit, c.Window, c.Type, c.Duration, c.Alloc = s.limit, s.w, s.typ, s.d, window.Adaptive
		s.mut(&c)
		r, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		var ws []int64
		for _, w := range r.Windows {
			ws = append(ws, w.Admitted)
		}
		fmt.Printf("%-24s first %+.1f later %+v cum %+.2f refused %d %v\n", s.name, r.FirstWindowErrorPct, r.LaterWindowsErrorPct, r.CumulativeErrorPct, r.RefusedTotal, ws)
	}
	for _, n := range []int{2, 4, 8, 16} {
		c := Defaults()
		c.Nodes, c.Burst, c.Duration = n, true, time.Second
		r, _ := Run(c)
		fmt.Print("burst ", n, ": ", r.Windows[0].Admitted, "  ")
	}
	fmt.Println()
}
