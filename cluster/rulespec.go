package cluster

import (
	"fmt"
	"math"
	"time"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// encodeRules puts rules on the wire.
func encodeRules(rules []window.Rule) *sluicev1.RuleSet {
	out := &sluicev1.RuleSet{Rules: make([]*sluicev1.RuleSpec, len(rules))}
	for i, r := range rules {
		out.Rules[i] = &sluicev1.RuleSpec{Name: r.Name, Count: r.Count, WindowNs: int64(r.Window),
			Type: uint32(r.Type), SyncIntervalNs: int64(r.SyncInterval),
			Allocation: uint32(r.Allocation), FailMode: uint32(r.FailMode)}
	}
	return out
}

// decodeRules reads rules from the wire and validates each; it never panics.
func decodeRules(m *sluicev1.RuleSet) ([]window.Rule, error) {
	out := make([]window.Rule, len(m.GetRules()))
	for i, s := range m.GetRules() {
		if s.GetType() > math.MaxUint8 || s.GetAllocation() > math.MaxUint8 || s.GetFailMode() > math.MaxUint8 {
			return nil, fmt.Errorf("rule %d (%q): an enum is out of range", i+1, s.GetName())
		}
		r := window.Rule{Name: s.GetName(), Count: s.GetCount(), Window: time.Duration(s.GetWindowNs()),
			Type: window.Type(s.GetType()), SyncInterval: time.Duration(s.GetSyncIntervalNs()),
			Allocation: window.Allocation(s.GetAllocation()), FailMode: window.FailMode(s.GetFailMode())}
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("rule %d (%q): %w", i+1, s.GetName(), err)
		}
		out[i] = r
	}
	return out, nil
}
