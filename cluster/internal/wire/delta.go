package wire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// Limits on what a peer may send in one message; anything beyond is a
// broken or hostile peer.
const (
	maxIncarnationsPerDelta = MaxDeltaEntries
	maxCount                = uint64(1) << 62
	// maxWindowSpan bounds how far apart a rule's windows in one delta may
	// be: 2^40 windows of even 10 ms are centuries.
	maxWindowSpan = uint64(1) << 40
)

// MaxDeltaEntries is the most entries, and the most rules, a peer's delta
// may hold (ParseDelta), and the most incarnations any delta may name.
// A node sends at most SplitEntries entries in one: the bound leaves room
// for a peer that splits differently, and keeps what one message of at
// most 16 MiB decodes to within tens of megabytes, where a message of
// entries of a few bytes each would decode to a hundred bytes apiece.
const MaxDeltaEntries = 1 << 16

// SplitEntries is the most entries a node puts in one delta it sends: at
// most 1,024 bytes of key and about 130 of counts each, 4,096 of them are
// under 5 MiB, within a gRPC message's 16.
const SplitEntries = 4096

// ErrBadDelta is wrapped by every error DecodeDelta returns.
var ErrBadDelta = errors.New("malformed delta")

// ErrDeltaTooLarge is wrapped, beside ErrBadDelta, by the error for a
// delta of more entries, rules or incarnations than MaxDeltaEntries.
var ErrDeltaTooLarge = errors.New("delta too large")

// EncodeDelta turns a counter delta into its wire form. Window indexes are
// sent as offsets from a base per rule, which costs one byte or none.
func EncodeDelta(d *counter.Delta) *sluicev1.Delta {
	out := &sluicev1.Delta{
		From: EncodeInc(d.From), Seq: d.Seq, Ack: d.Ack, Live: uint32(max(d.Live, 0)), Full: d.Full,
		Kind:         sluicev1.Kind(d.Kind),
		Incarnations: make([]*sluicev1.Incarnation, len(d.Incarnations)),
		Rules:        make([]*sluicev1.RuleDelta, len(d.Rules)),
	}
	for i, inc := range d.Incarnations {
		out.Incarnations[i] = EncodeInc(inc)
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
				RateUntil: e.RateUntil, Pooled: e.Pooled,
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

// EncodeInc puts an incarnation on the wire.
func EncodeInc(inc counter.Incarnation) *sluicev1.Incarnation {
	return &sluicev1.Incarnation{Node: inc.Node, Boot: inc.Boot}
}

// DecodeDelta checks a delta from a message and turns it into a counter
// delta, as ParseDelta does the wire form, but for the bound on entries
// and rules: what a node saved, or its strict log holds, may hold every
// key it has. It never panics, whatever the message holds.
func DecodeDelta(m *sluicev1.Delta) (*counter.Delta, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: empty message", ErrBadDelta)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDelta, err)
	}
	d, _, err := parseDelta(b, 0)
	return d, err
}
