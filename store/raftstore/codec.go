package raftstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/store"
)

// Log entry encoding, version 1:
//
//	byte     version (1)
//	byte     flags: bit 0 AppendedAt present, bit 1 Data non-nil,
//	         bit 2 Extensions non-nil; other bits must be zero
//	byte     Type
//	uvarint  Index
//	uvarint  Term
//	8 bytes  AppendedAt as big-endian int64 Unix nanoseconds, if bit 0
//	uvarint  len(Data), then Data, if bit 1
//	uvarint  len(Extensions), then Extensions, if bit 2
//
// Nothing may follow. The flags keep a zero AppendedAt and nil slices distinct
// from the Unix epoch and empty slices, so every encodable entry decodes to an
// identical entry (times come back in UTC).
const (
	codecV1 byte = 1

	flagAppendedAt byte = 1 << 0
	flagData       byte = 1 << 1
	flagExtensions byte = 1 << 2
	knownFlags          = flagAppendedAt | flagData | flagExtensions

	// headerLen is the version, flags and type bytes.
	headerLen = 3
)

// Bounds of the times that Unix nanoseconds in an int64 can represent.
var (
	minAppendedAt = time.Unix(0, math.MinInt64)
	maxAppendedAt = time.Unix(0, math.MaxInt64)
)

// encodedLogLen returns the number of bytes appendLog adds for l.
func encodedLogLen(l *raft.Log) int {
	n := headerLen + uvarintLen(l.Index) + uvarintLen(l.Term)
	if !l.AppendedAt.IsZero() {
		n += 8
	}
	if l.Data != nil {
		n += uvarintLen(uint64(len(l.Data))) + len(l.Data)
	}
	if l.Extensions != nil {
		n += uvarintLen(uint64(len(l.Extensions))) + len(l.Extensions)
	}
	return n
}

// uvarintLen returns the length of the uvarint encoding of v.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// encodeLog returns the encoding of l.
func encodeLog(l *raft.Log) ([]byte, error) {
	return appendLog(make([]byte, 0, encodedLogLen(l)), l)
}

// appendLog appends the encoding of l to dst. It fails only if l.AppendedAt
// is outside the years 1678 to 2262, which Unix nanoseconds cannot hold.
func appendLog(dst []byte, l *raft.Log) ([]byte, error) {
	var flags byte
	if !l.AppendedAt.IsZero() {
		if l.AppendedAt.Before(minAppendedAt) || l.AppendedAt.After(maxAppendedAt) {
			return dst, fmt.Errorf("appended-at time %s is outside the range of Unix nanoseconds", l.AppendedAt)
		}
		flags |= flagAppendedAt
	}
	if l.Data != nil {
		flags |= flagData
	}
	if l.Extensions != nil {
		flags |= flagExtensions
	}

	dst = append(dst, codecV1, flags, byte(l.Type))
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	if flags&flagAppendedAt != 0 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(l.AppendedAt.UnixNano()))
	}
	if flags&flagData != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
		dst = append(dst, l.Data...)
	}
	if flags&flagExtensions != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
		dst = append(dst, l.Extensions...)
	}
	return dst, nil
}

// decodeLog decodes an entry encoded by appendLog into l, replacing every
// field. l.Data and l.Extensions alias buf (with their capacity clipped so
// appending to one cannot overwrite the other), so buf must not be reused.
// On error l is left unchanged and the error wraps store.ErrCorrupt.
func decodeLog(buf []byte, l *raft.Log) error {
	if len(buf) < headerLen {
		return fmt.Errorf("%w: log entry is %d bytes, shorter than its header", store.ErrCorrupt, len(buf))
	}
	if buf[0] != codecV1 {
		return fmt.Errorf("%w: unsupported log encoding version %d", store.ErrCorrupt, buf[0])
	}
	flags := buf[1]
	if flags&^knownFlags != 0 {
		return fmt.Errorf("%w: unknown log encoding flags %#02x", store.ErrCorrupt, flags&^knownFlags)
	}
	out := raft.Log{Type: raft.LogType(buf[2])}
	d := decoder{buf: buf[headerLen:]}

	out.Index = d.uvarint("index")
	out.Term = d.uvarint("term")
	if flags&flagAppendedAt != 0 {
		out.AppendedAt = time.Unix(0, int64(d.uint64("appended-at time"))).UTC()
	}
	if flags&flagData != 0 {
		out.Data = d.bytes("data")
	}
	if flags&flagExtensions != 0 {
		out.Extensions = d.bytes("extensions")
	}
	if d.err == nil && len(d.buf) != 0 {
		d.err = fmt.Errorf("%w: %d unexpected bytes after log entry", store.ErrCorrupt, len(d.buf))
	}
	if d.err != nil {
		return d.err
	}
	*l = out
	return nil
}

// decoder reads fields from the front of buf. After the first failure it
// records the error in err and every later read returns a zero value.
type decoder struct {
	buf []byte
	err error
}

// uvarint reads a uvarint-encoded field called name.
func (d *decoder) uvarint(name string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.err = fmt.Errorf("%w: bad %s varint", store.ErrCorrupt, name)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// uint64 reads a fixed 8-byte big-endian field called name.
func (d *decoder) uint64(name string) uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.buf) < 8 {
		d.err = fmt.Errorf("%w: truncated %s", store.ErrCorrupt, name)
		return 0
	}
	v := binary.BigEndian.Uint64(d.buf)
	d.buf = d.buf[8:]
	return v
}

// bytes reads a length-prefixed field called name, returning a slice of the
// input with its capacity clipped to its length.
func (d *decoder) bytes(name string) []byte {
	n := d.uvarint(name + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)) {
		d.err = fmt.Errorf("%w: %s length %d exceeds the %d bytes left", store.ErrCorrupt, name, n, len(d.buf))
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}
