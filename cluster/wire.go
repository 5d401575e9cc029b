package cluster

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// Limits on what a peer may send in one message; anything beyond is a
// broken or hostile peer.
const (
	maxIncarnationsPerDelta = 1 << 16
	maxCount                = uint64(1) << 62
	// maxWindowSpan bounds how far apart a rule's windows in one delta may
	// be: 2^40 windows of even 10 ms are centuries.
	maxWindowSpan = uint64(1) << 40
)

// errBadDelta is wrapped by every error decodeDelta returns.
var errBadDelta = errors.New("malformed delta")

// encodeDelta turns a counter delta into its wire form. Window indexes are
// sent as offsets from a base per rule, which costs one byte or none.
func encodeDelta(d *counter.Delta) *sluicev1.Delta {
	out := &sluicev1.Delta{
		From: encodeInc(d.From), Seq: d.Seq, Ack: d.Ack, Live: uint32(max(d.Live, 0)), Full: d.Full,
		Kind:         sluicev1.Kind(d.Kind),
		Incarnations: make([]*sluicev1.Incarnation, len(d.Incarnations)),
		Rules:        make([]*sluicev1.RuleDelta, len(d.Rules)),
	}
	for i, inc := range d.Incarnations {
		out.Incarnations[i] = encodeInc(inc)
	}
	for i := range d.Rules {
		rd := &d.Rules[i]
		var base int64
		if len(rd.Entries) > 0 {
			base = rd.Entries[0].Window
		}
		wr := &sluicev1.RuleDelta{Rule: rd.Rule, BaseWindow: base, Entries: make([]*sluicev1.Entry, len(rd.Entries))}
		for j := range rd.Entries {
			e := &rd.Entries[j]
			wr.Entries[j] = &sluicev1.Entry{
				Key: e.Key, WindowOffset: e.Window - base, Inc: e.Inc,
				Admitted: uint64(max(e.Admitted, 0)), Demand: uint64(max(e.Demand, 0)),
				Claim: uint64(max(e.Claim, 0)), Need: uint64(max(e.Need, 0)),
				Prev: uint64(max(e.Prev, 0)), Grant: uint64(max(e.Grant, 0)), Rate: uint64(max(e.Rate, 0)),
				RateFrom: e.RateFrom, Next: uint64(max(e.Next, 0)), Ask: uint64(max(e.Ask, 0)), Told: e.Told,
			}
			if e.Opens {
				opening := uint64(max(e.Opening, 0))
				wr.Entries[j].Opening = &opening
			}
		}
		out.Rules[i] = wr
	}
	return out
}

// WireSize returns the size in bytes of d encoded as a sync message, for measuring sync traffic.
func WireSize(d *counter.Delta) int { return proto.Size(encodeDelta(d)) }

func encodeInc(inc counter.Incarnation) *sluicev1.Incarnation {
	return &sluicev1.Incarnation{Node: inc.Node, Boot: inc.Boot}
}

// decodeDelta checks a delta from the wire and turns it into a counter delta.
// It never panics, whatever the message holds.
func decodeDelta(m *sluicev1.Delta) (*counter.Delta, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: empty message", errBadDelta)
	}
	from, err := decodeInc(m.GetFrom())
	if err != nil {
		return nil, fmt.Errorf("%w: from: %w", errBadDelta, err)
	}
	if len(m.GetIncarnations()) > maxIncarnationsPerDelta {
		return nil, fmt.Errorf("%w from %q: %d incarnations", errBadDelta, from.Node, len(m.GetIncarnations()))
	}
	if m.GetKind() < sluicev1.Kind_KIND_SYNC || m.GetKind() > sluicev1.Kind_KIND_VIEW {
		return nil, fmt.Errorf("%w from %q: kind %d is unknown", errBadDelta, from.Node, m.GetKind())
	}
	d := &counter.Delta{From: from, Seq: m.GetSeq(), Ack: m.GetAck(), Live: int(min(m.GetLive(), math.MaxInt32)), Full: m.GetFull(),
		Kind:         counter.Kind(m.GetKind()),
		Incarnations: make([]counter.Incarnation, len(m.GetIncarnations())), Rules: make([]counter.RuleDelta, 0, len(m.GetRules()))}
	for i, inc := range m.GetIncarnations() {
		if d.Incarnations[i], err = decodeInc(inc); err != nil {
			return nil, fmt.Errorf("%w from %q: incarnation %d: %w", errBadDelta, from.Node, i, err)
		}
	}
	for _, wr := range m.GetRules() {
		if wr.GetRule() == "" {
			return nil, fmt.Errorf("%w from %q: a rule delta has no rule name", errBadDelta, from.Node)
		}
		rd := counter.RuleDelta{Rule: wr.GetRule(), Entries: make([]counter.Entry, len(wr.GetEntries()))}
		base := wr.GetBaseWindow()
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for j, e := range wr.GetEntries() {
			off := e.GetWindowOffset()
			if off > 0 && base > math.MaxInt64-off || off < 0 && base < math.MinInt64-off {
				return nil, fmt.Errorf("%w from %q: rule %q key %q: window overflows", errBadDelta, from.Node, rd.Rule, e.GetKey())
			}
			if name, v := overRange(e); name != "" {
				return nil, fmt.Errorf("%w from %q: rule %q key %q: %s %d is out of range", errBadDelta, from.Node, rd.Rule, e.GetKey(), name, v)
			}
			if int(e.GetInc()) >= len(d.Incarnations) {
				return nil, fmt.Errorf("%w from %q: rule %q key %q names incarnation %d of %d",
					errBadDelta, from.Node, rd.Rule, e.GetKey(), e.GetInc(), len(d.Incarnations))
			}
			w := base + off
			lo, hi = min(lo, w), max(hi, w)
			// A rule's windows in one delta lie close together; a spread
			// this wide could not be encoded again as offsets from one base.
			if uint64(hi)-uint64(lo) > maxWindowSpan {
				return nil, fmt.Errorf("%w from %q: rule %q key %q: windows span more than 2^40", errBadDelta, from.Node, rd.Rule, e.GetKey())
			}
			rd.Entries[j] = counter.Entry{
				Key: e.GetKey(), Window: w, Inc: e.GetInc(),
				Admitted: int64(e.GetAdmitted()), Demand: int64(e.GetDemand()),
				Claim: int64(e.GetClaim()), Need: int64(e.GetNeed()),
				Opening: int64(e.GetOpening()), Opens: e.Opening != nil,
				Prev: int64(e.GetPrev()), Grant: int64(e.GetGrant()), Rate: int64(e.GetRate()),
				RateFrom: e.GetRateFrom(), Next: int64(e.GetNext()), Ask: int64(e.GetAsk()), Told: e.GetTold(),
			}
		}
		d.Rules = append(d.Rules, rd)
	}
	return d, nil
}

// overRange names the first count of e above maxCount.
func overRange(e *sluicev1.Entry) (string, uint64) {
	switch {
	case e.GetAdmitted() > maxCount:
		return "admitted", e.GetAdmitted()
	case e.GetDemand() > maxCount:
		return "demand", e.GetDemand()
	case e.GetClaim() > maxCount:
		return "claim", e.GetClaim()
	case e.GetNeed() > maxCount:
		return "need", e.GetNeed()
	case e.GetOpening() > maxCount:
		return "opening", e.GetOpening()
	case e.GetPrev() > maxCount:
		return "prev", e.GetPrev()
	case e.GetGrant() > maxCount:
		return "grant", e.GetGrant()
	case e.GetRate() > maxCount:
		return "rate", e.GetRate()
	case e.GetNext() > maxCount:
		return "next", e.GetNext()
	case e.GetAsk() > maxCount:
		return "ask", e.GetAsk()
	}
	return "", 0
}

func decodeInc(m *sluicev1.Incarnation) (counter.Incarnation, error) {
	if m == nil || m.GetNode() == "" {
		return counter.Incarnation{}, errors.New("incarnation has no node name")
	}
	if len(m.GetNode()) > 256 {
		return counter.Incarnation{}, fmt.Errorf("node name is %d bytes, at most 256", len(m.GetNode()))
	}
	return counter.Incarnation{Node: m.GetNode(), Boot: m.GetBoot()}, nil
}
