package wire

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicehq/sluice/counter"
)

// A sync round sends each owner or contributor one delta of up to tens of
// thousands of entries. Built as generated protobuf messages, every entry
// costs a message on each side and most of a microsecond; the codec here
// writes and reads the same wire format (sluice.v1.Delta) straight from and
// into counter deltas. EncodeDelta and DecodeDelta, for the messages that
// embed a delta (strict snapshots and batches), go through it.

// Field numbers of sluice.v1.Delta, Incarnation, RuleDelta and Entry.
const (
	fDeltaFrom, fDeltaSeq, fDeltaIncs, fDeltaLive, fDeltaFull, fDeltaRules, fDeltaAck, fDeltaSentAt, fDeltaKind = 1, 2, 3, 4, 5, 6, 7, 8, 9
	fIncNode, fIncBoot                                                                                          = 1, 2
	fRuleName, fRuleBase, fRuleEntries                                                                          = 1, 2, 3
	fKey, fOffset, fInc, fAdmitted, fDemand, fClaim, fNeed, fOpening                                            = 1, 2, 3, 4, 5, 6, 7, 8
	fPrev, fGrant, fRate, fRateFrom, fNext, fAsk, fTold, fRateUntil, fPooled                                    = 9, 10, 11, 12, 13, 14, 15, 16, 17
)

// AppendDelta appends d, sent at sentAt (0: no time), in the wire form of
// sluice.v1.Delta, byte for byte as proto.Marshal writes it. Window indexes
// are sent as offsets from a base per rule, which costs one byte or none.
func AppendDelta(b []byte, d *counter.Delta, sentAt int64) []byte {
	b = appendInc(b, fDeltaFrom, d.From)
	b = appendVarint(b, fDeltaSeq, d.Seq)
	for _, inc := range d.Incarnations {
		b = appendInc(b, fDeltaIncs, inc)
	}
	b = appendVarint(b, fDeltaLive, uint64(uint32(max(d.Live, 0))))
	if d.Full {
		b = appendVarint(b, fDeltaFull, 1)
	}
	for i := range d.Rules {
		rd := &d.Rules[i]
		var base int64
		if len(rd.Entries) > 0 {
			base = rd.Entries[0].Window
		}
		b = protowire.AppendTag(b, fDeltaRules, protowire.BytesType)
		rule := len(b)
		b = appendString(b, fRuleName, rd.Rule)
		b = appendVarint(b, fRuleBase, uint64(base))
		for j := range rd.Entries {
			b = protowire.AppendTag(b, fRuleEntries, protowire.BytesType)
			// One byte for the length, which an entry seldom outgrows;
			// written once the entry is, so each is encoded in one pass.
			at := len(b)
			b = append(b, 0)
			b = appendEntry(b, &rd.Entries[j], base)
			b = putLength(b, at, len(b)-at-1)
		}
		b = insertLength(b, rule, len(b)-rule)
	}
	b = appendVarint(b, fDeltaAck, d.Ack)
	b = appendVarint(b, fDeltaSentAt, uint64(sentAt))
	b = appendVarint(b, fDeltaKind, uint64(d.Kind))
	return b
}

// putLength writes n, the length of what follows b[at], as a varint at
// b[at], where one byte was left for it; a longer varint moves the body up.
func putLength(b []byte, at, n int) []byte {
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k-1)...)
	copy(b[at+k:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

// insertLength inserts n, the length of b[at:], as a varint before it.
func insertLength(b []byte, at, n int) []byte {
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k)...)
	copy(b[at+k:], b[at:at+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

// DeltaCap is a size AppendDelta's output seldom outgrows, found without
// encoding anything.
func DeltaCap(d *counter.Delta) int {
	n := 64
	for _, inc := range d.Incarnations {
		n += len(inc.Node) + 16
	}
	for i := range d.Rules {
		rd := &d.Rules[i]
		n += len(rd.Rule) + 16
		for j := range rd.Entries {
			n += len(rd.Entries[j].Key) + 64
		}
	}
	return n
}

// DeltaSize is the size of d on the wire, as AppendDelta writes it.
func DeltaSize(d *counter.Delta, sentAt int64) int {
	n := incSize(fDeltaFrom, d.From) + varintSize(fDeltaSeq, d.Seq)
	for _, inc := range d.Incarnations {
		n += incSize(fDeltaIncs, inc)
	}
	n += varintSize(fDeltaLive, uint64(uint32(max(d.Live, 0))))
	if d.Full {
		n += 2
	}
	for i := range d.Rules {
		rd := &d.Rules[i]
		var base int64
		if len(rd.Entries) > 0 {
			base = rd.Entries[0].Window
		}
		n += bytesSize(fDeltaRules, ruleSize(rd, base))
	}
	return n + varintSize(fDeltaAck, d.Ack) + varintSize(fDeltaSentAt, uint64(sentAt)) + varintSize(fDeltaKind, uint64(d.Kind))
}

func ruleSize(rd *counter.RuleDelta, base int64) int {
	n := stringSize(fRuleName, rd.Rule) + varintSize(fRuleBase, uint64(base))
	for j := range rd.Entries {
		n += bytesSize(fRuleEntries, entrySize(&rd.Entries[j], base))
	}
	return n
}

// entryFields lists e's numeric fields as sent, in field order from
// window_offset (2) to pooled (17); opening (8) is sent only when e.Opens.
func entryFields(e *counter.Entry, base int64) [16]uint64 {
	u := func(v int64) uint64 { return uint64(max(v, 0)) }
	pooled := uint64(0)
	if e.Pooled {
		pooled = 1
	}
	return [16]uint64{
		protowire.EncodeZigZag(e.Window - base), uint64(e.Inc), u(e.Admitted), u(e.Demand), u(e.Claim), u(e.Need),
		u(e.Opening), u(e.Prev), u(e.Grant), u(e.Rate), uint64(e.RateFrom), u(e.Next), u(e.Ask), e.Told,
		uint64(e.RateUntil), pooled,
	}
}

func entrySize(e *counter.Entry, base int64) int {
	n := stringSize(fKey, e.Key)
	for k, v := range entryFields(e, base) {
		num := protowire.Number(fOffset + k)
		if num == fOpening { // present when the entry says so, zero or not
			if e.Opens {
				n += 1 + protowire.SizeVarint(v)
			}
			continue
		}
		n += varintSize(num, v)
	}
	return n
}

func appendEntry(b []byte, e *counter.Entry, base int64) []byte {
	b = appendString(b, fKey, e.Key)
	for k, v := range entryFields(e, base) {
		num := protowire.Number(fOffset + k)
		if num == fOpening {
			if e.Opens {
				b = protowire.AppendTag(b, fOpening, protowire.VarintType)
				b = protowire.AppendVarint(b, v)
			}
			continue
		}
		b = appendVarint(b, num, v)
	}
	return b
}

func appendInc(b []byte, num protowire.Number, inc counter.Incarnation) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(incBodySize(inc)))
	b = appendString(b, fIncNode, inc.Node)
	if inc.Boot != 0 {
		b = protowire.AppendTag(b, fIncBoot, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, inc.Boot)
	}
	return b
}

func incBodySize(inc counter.Incarnation) int {
	n := stringSize(fIncNode, inc.Node)
	if inc.Boot != 0 {
		n += 9
	}
	return n
}

func incSize(num protowire.Number, inc counter.Incarnation) int {
	return bytesSize(num, incBodySize(inc))
}

// appendVarint appends a varint field, left out when zero as proto3 does.
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func varintSize(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return bytesSize(num, len(s))
}

func bytesSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// wireDelta is a delta as read off the wire, before it is checked.
type wireDelta struct {
	from    counter.Incarnation
	hasFrom bool
	d       counter.Delta
	incs    int // incarnations sent, kept or not
	sentAt  int64
	kind    uint64
	live    uint64
	// rules and entries count the rules and entries sent, kept or not:
	// past limit (0: none), the rest are not read.
	rules, entries, limit int
	// bases are the rules' base windows, and read, per rule and entry, what
	// is known of the entry only on the wire.
	bases []int64
	read  [][]wireEntry
}

// wireEntry is what an entry says on the wire that a counter entry does
// not hold: its window offset, and its first count out of range.
type wireEntry struct {
	off      int64
	overName string
	over     uint64
}

// ParseDelta reads a peer's delta in the wire form of sluice.v1.Delta and
// checks it as DecodeDelta does, and that it holds at most MaxDeltaEntries
// entries and rules, returning the time it was sent (0 if it does not
// say). It never panics, whatever the bytes: a malformed message is an
// error that wraps ErrBadDelta, and one too large ErrDeltaTooLarge too.
func ParseDelta(b []byte) (*counter.Delta, int64, error) {
	return parseDelta(b, MaxDeltaEntries)
}

// parseDelta is ParseDelta with at most limit entries and rules (0: any).
func parseDelta(b []byte, limit int) (*counter.Delta, int64, error) {
	w := wireDelta{limit: limit}
	if err := w.parse(b); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrBadDelta, err)
	}
	d, err := w.check()
	if err != nil {
		return nil, 0, err
	}
	return d, w.sentAt, nil
}

// fields calls f with each field of msg, its number, wire type and
// value: v for varint and fixed fields, body for length-delimited ones.
// Groups and malformed fields are errors.
func fields(msg []byte, f func(num protowire.Number, typ protowire.Type, v uint64, body []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		var v uint64
		var body []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(msg)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(msg)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(msg)
			v = uint64(v32)
		case protowire.BytesType:
			body, n = protowire.ConsumeBytes(msg)
		default:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		if err := f(num, typ, v, body); err != nil {
			return err
		}
	}
	return nil
}

func (w *wireDelta) parse(b []byte) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v uint64, body []byte) error {
		switch {
		case num == fDeltaFrom && typ == protowire.BytesType:
			w.hasFrom = true
			return readInc(body, &w.from)
		case num == fDeltaSeq && typ == protowire.VarintType:
			w.d.Seq = v
		case num == fDeltaIncs && typ == protowire.BytesType:
			if w.incs++; w.incs > maxIncarnationsPerDelta {
				return nil // counted, and refused once the sender is known
			}
			var inc counter.Incarnation
			if err := readInc(body, &inc); err != nil {
				return err
			}
			w.d.Incarnations = append(w.d.Incarnations, inc)
		case num == fDeltaLive && typ == protowire.VarintType:
			w.live = uint64(uint32(v))
		case num == fDeltaFull && typ == protowire.VarintType:
			w.d.Full = v != 0
		case num == fDeltaRules && typ == protowire.BytesType:
			return w.readRule(body)
		case num == fDeltaAck && typ == protowire.VarintType:
			w.d.Ack = v
		case num == fDeltaSentAt && typ == protowire.VarintType:
			w.sentAt = int64(v)
		case num == fDeltaKind && typ == protowire.VarintType:
			w.kind = uint64(int32(v))
		}
		return nil
	})
}

func readInc(b []byte, inc *counter.Incarnation) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v uint64, body []byte) error {
		switch {
		case num == fIncNode && typ == protowire.BytesType:
			inc.Node = string(body)
		case num == fIncBoot && typ == protowire.Fixed64Type:
			inc.Boot = v
		}
		return nil
	})
}

// over reports whether n is past the delta's limit.
func (w *wireDelta) over(n int) bool { return w.limit > 0 && n > w.limit }

func (w *wireDelta) readRule(b []byte) error {
	if w.rules++; w.over(w.rules) {
		return nil // counted, and refused once the sender is known
	}
	rd := counter.RuleDelta{}
	var base int64
	var read []wireEntry
	if n := countEntries(b); n > 0 {
		if w.limit > 0 {
			n = min(n, max(w.limit-w.entries, 0))
		}
		rd.Entries, read = make([]counter.Entry, 0, n), make([]wireEntry, 0, n)
	}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, body []byte) error {
		switch {
		case num == fRuleName && typ == protowire.BytesType:
			rd.Rule = string(body)
		case num == fRuleBase && typ == protowire.VarintType:
			base = int64(v)
		case num == fRuleEntries && typ == protowire.BytesType:
			if w.entries++; w.over(w.entries) {
				return nil // as for rules
			}
			var e counter.Entry
			var we wireEntry
			if err := readEntry(body, &e, &we); err != nil {
				return err
			}
			rd.Entries = append(rd.Entries, e)
			read = append(read, we)
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.d.Rules = append(w.d.Rules, rd)
	w.bases = append(w.bases, base)
	w.read = append(w.read, read)
	return nil
}

// countEntries is how many entries a rule's bytes hold, 0 if they are
// malformed (reading them then says why), so that a rule of thousands is
// read into slices of the right size at once.
func countEntries(b []byte) int {
	n := 0
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 || typ == protowire.StartGroupType {
			return 0
		}
		b = b[k:]
		if k = protowire.ConsumeFieldValue(num, typ, b); k < 0 {
			return 0
		}
		b = b[k:]
		if num == fRuleEntries && typ == protowire.BytesType {
			n++
		}
	}
	return n
}

// readEntry reads an entry, and into we its window offset and its first
// count above maxCount.
func readEntry(b []byte, e *counter.Entry, we *wireEntry) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v uint64, body []byte) error {
		if num == fKey {
			if typ == protowire.BytesType {
				e.Key = string(body)
			}
			return nil
		}
		if typ != protowire.VarintType {
			return nil
		}
		var count *int64
		switch num {
		case fOffset:
			we.off = protowire.DecodeZigZag(v)
		case fInc:
			e.Inc = uint32(v)
		case fAdmitted:
			count = &e.Admitted
		case fDemand:
			count = &e.Demand
		case fClaim:
			count = &e.Claim
		case fNeed:
			count = &e.Need
		case fOpening:
			count, e.Opens = &e.Opening, true
		case fPrev:
			count = &e.Prev
		case fGrant:
			count = &e.Grant
		case fRate:
			count = &e.Rate
		case fRateFrom:
			e.RateFrom = int64(v)
		case fRateUntil:
			e.RateUntil = int64(v)
		case fPooled:
			e.Pooled = v != 0
		case fNext:
			count = &e.Next
		case fAsk:
			count = &e.Ask
		case fTold:
			e.Told = v
		}
		if count != nil {
			*count = int64(min(v, maxCount))
			if v > maxCount && we.overName == "" {
				we.overName, we.over = countName(num), v
			}
		}
		return nil
	})
}

// countName is the wire name of an entry's count field.
func countName(num protowire.Number) string {
	switch num {
	case fAdmitted:
		return "admitted"
	case fDemand:
		return "demand"
	case fClaim:
		return "claim"
	case fNeed:
		return "need"
	case fOpening:
		return "opening"
	case fPrev:
		return "prev"
	case fGrant:
		return "grant"
	case fRate:
		return "rate"
	case fNext:
		return "next"
	}
	return "ask"
}

// check turns what was read into a counter delta, with the checks of the
// wire: every incarnation named, every count in range, windows that can be
// sent again as offsets from one base.
func (w *wireDelta) check() (*counter.Delta, error) {
	if !w.hasFrom || w.from.Node == "" {
		return nil, fmt.Errorf("%w: from: incarnation has no node name", ErrBadDelta)
	}
	if err := checkInc(w.from); err != nil {
		return nil, fmt.Errorf("%w: from: %w", ErrBadDelta, err)
	}
	from := w.from
	if w.kind > uint64(counter.KindView) {
		return nil, fmt.Errorf("%w from %q: kind %d is unknown", ErrBadDelta, from.Node, int32(w.kind))
	}
	for _, n := range []struct {
		what      string
		n, before int
	}{{"incarnations", w.incs, maxIncarnationsPerDelta}, {"rules", w.rules, w.limit}, {"entries", w.entries, w.limit}} {
		if n.before > 0 && n.n > n.before {
			return nil, fmt.Errorf("%w from %q: %w: %s: %d in one delta, at most %d",
				ErrBadDelta, from.Node, ErrDeltaTooLarge, n.what, n.n, n.before)
		}
	}
	d := &w.d
	d.From, d.Kind, d.Live = from, counter.Kind(w.kind), int(min(w.live, math.MaxInt32))
	for i, inc := range d.Incarnations {
		if inc.Node == "" {
			return nil, fmt.Errorf("%w from %q: incarnation %d: incarnation has no node name", ErrBadDelta, from.Node, i)
		}
		if err := checkInc(inc); err != nil {
			return nil, fmt.Errorf("%w from %q: incarnation %d: %w", ErrBadDelta, from.Node, i, err)
		}
	}
	for r := range d.Rules {
		rd := &d.Rules[r]
		if rd.Rule == "" {
			return nil, fmt.Errorf("%w from %q: a rule delta has no rule name", ErrBadDelta, from.Node)
		}
		base := w.bases[r]
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for j := range rd.Entries {
			e := &rd.Entries[j]
			we := &w.read[r][j]
			off := we.off
			if off > 0 && base > math.MaxInt64-off || off < 0 && base < math.MinInt64-off {
				return nil, fmt.Errorf("%w from %q: rule %q key %q: window overflows", ErrBadDelta, from.Node, rd.Rule, e.Key)
			}
			if we.overName != "" {
				return nil, fmt.Errorf("%w from %q: rule %q key %q: %s %d is out of range", ErrBadDelta, from.Node, rd.Rule, e.Key, we.overName, we.over)
			}
			if int(e.Inc) >= len(d.Incarnations) {
				return nil, fmt.Errorf("%w from %q: rule %q key %q names incarnation %d of %d",
					ErrBadDelta, from.Node, rd.Rule, e.Key, e.Inc, len(d.Incarnations))
			}
			e.Window = base + off
			lo, hi = min(lo, e.Window), max(hi, e.Window)
			// A rule's windows in one delta lie close together; a spread
			// this wide could not be encoded again as offsets from one base.
			if uint64(hi)-uint64(lo) > maxWindowSpan {
				return nil, fmt.Errorf("%w from %q: rule %q key %q: windows span more than 2^40", ErrBadDelta, from.Node, rd.Rule, e.Key)
			}
		}
	}
	if d.Rules == nil {
		d.Rules = []counter.RuleDelta{}
	}
	if d.Incarnations == nil {
		d.Incarnations = []counter.Incarnation{}
	}
	return d, nil
}

func checkInc(inc counter.Incarnation) error {
	if len(inc.Node) > 256 {
		return fmt.Errorf("node name is %d bytes, at most 256", len(inc.Node))
	}
	return nil
}
