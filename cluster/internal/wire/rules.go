package wire

import (
	"fmt"
	"math"
	"time"

	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// EncodeRules puts rules on the wire.
func EncodeRules(rules []window.Rule) *sluicev1.RuleSet {
	out := &sluicev1.RuleSet{Rules: make([]*sluicev1.RuleSpec, len(rules))}
	for i, r := range rules {
		out.Rules[i] = &sluicev1.RuleSpec{Name: r.Name, Count: r.Count, WindowNs: int64(r.Window),
			Type: uint32(r.Type), SyncIntervalNs: int64(r.SyncInterval),
			Allocation: AllocationNumber(r.Allocation), FailMode: uint32(r.FailMode), Shadow: r.Shadow}
	}
	return out
}

// DecodeRules reads rules from the wire and validates each; it never panics.
func DecodeRules(m *sluicev1.RuleSet) ([]window.Rule, error) {
	out := make([]window.Rule, len(m.GetRules()))
	for i, s := range m.GetRules() {
		if s.GetType() > math.MaxUint8 || s.GetFailMode() > math.MaxUint8 {
			return nil, fmt.Errorf("rule %d (%q): an enum is out of range", i+1, s.GetName())
		}
		alloc, err := allocationFromWire(s.GetAllocation())
		if err != nil {
			return nil, fmt.Errorf("rule %d (%q): %w", i+1, s.GetName(), err)
		}
		r := window.Rule{Name: s.GetName(), Count: s.GetCount(), Window: time.Duration(s.GetWindowNs()),
			Type: window.Type(s.GetType()), SyncInterval: time.Duration(s.GetSyncIntervalNs()),
			Allocation: alloc, FailMode: window.FailMode(s.GetFailMode()), Shadow: s.GetShadow()}
		// A rule of the log may be a part of one with several limits
		// (window.Rule.Parts), named after it.
		if err := r.ValidatePart(); err != nil {
			return nil, fmt.Errorf("rule %d (%q): %w", i+1, s.GetName(), err)
		}
		out[i] = r
	}
	return out, nil
}

// The wire numbers of the allocation policies are fixed, whatever order
// window.Allocation declares them in: logs written and peers running before
// owner became the default read 0 as adaptive and 1 as classic.
const (
	wireAdaptive uint32 = 0
	wireClassic  uint32 = 1
	wireOwner    uint32 = 2
)

// AllocationNumber is a's number on the wire and in the rules hash.
func AllocationNumber(a window.Allocation) uint32 {
	switch a {
	case window.Adaptive:
		return wireAdaptive
	case window.Classic:
		return wireClassic
	default:
		return wireOwner
	}
}

// allocationFromWire reads an allocation number from the wire.
func allocationFromWire(v uint32) (window.Allocation, error) {
	switch v {
	case wireAdaptive:
		return window.Adaptive, nil
	case wireClassic:
		return window.Classic, nil
	case wireOwner:
		return window.Owner, nil
	}
	return 0, fmt.Errorf("allocation: unknown policy number %d", v)
}
