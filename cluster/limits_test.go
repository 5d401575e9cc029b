package cluster

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// refusals reads what m counts of each bound, by reason.
func refusals(m Metrics) map[string]int64 {
	return map[string]int64{"batch_size": m.RefusedBatchSize, "key_length": m.RefusedKeyLength,
		"rule_length": m.RefusedRuleLength, "message_size": m.RefusedMessageSize, "delta_size": m.RefusedDeltaSize}
}

// TestInputLimits sends a node's gRPC port one request past each bound on
// what it takes from outside: each is refused with the code and a message
// naming the field and the bound, and counted under its reason alone.
func TestInputLimits(t *testing.T) {
	n, err := Start(context.Background(), Config{Name: "limits", GRPCAddr: "127.0.0.1:0", Logger: testLogger(t),
		Rules: []window.Rule{{Name: "api", Count: 10, Window: time.Minute, Type: window.Fixed}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	limiter := sluicev1.NewLimiterClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()

	check := func(rule, key string) *sluicev1.CheckRequest {
		return &sluicev1.CheckRequest{Rule: rule, Key: key, Hits: 1}
	}
	batch := func(n int, at int, c *sluicev1.CheckRequest) *sluicev1.CheckBatchRequest {
		req := &sluicev1.CheckBatchRequest{}
		for i := range n {
			req.Checks = append(req.Checks, check("api", "k"+strconv.Itoa(i)))
		}
		if c != nil {
			req.Checks[at] = c
		}
		return req
	}
	// sync sends msgs on one Peer.Sync stream and returns how it ended.
	sync := func(msgs ...[]byte) error {
		s, err := sluicev1.NewPeerClient(conn).Sync(ctx, grpc.ForceCodecV2(newPeerCodec()))
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if err := s.SendMsg(&rawDelta{m}); err != nil {
				break // the server ended the stream: CloseAndRecv says why
			}
		}
		_, err = s.CloseAndRecv()
		return err
	}
	delta := func(entries int, key string) []byte {
		from := &sluicev1.Incarnation{Node: "flooder", Boot: 1}
		rd := &sluicev1.RuleDelta{Rule: "api", BaseWindow: window.Index(time.Now().UnixNano(), time.Minute)}
		for i := range entries {
			rd.Entries = append(rd.Entries, &sluicev1.Entry{Key: key + strconv.Itoa(i), Admitted: 1})
		}
		b, err := proto.Marshal(&sluicev1.Delta{From: from, Incarnations: []*sluicev1.Incarnation{from},
			Rules: []*sluicev1.RuleDelta{rd}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	long := strings.Repeat("k", counter.MaxKeyLen+1)
	longRule := strings.Repeat("r", counter.MaxRuleLen+1)
	tests := []struct {
		name    string
		call    func() error
		code    codes.Code
		message string // a part of the error's
		reason  string // the refusal counted, "" for none
	}{
		{"a key at the bound", func() error {
			_, err := limiter.Check(ctx, check("api", strings.Repeat("k", counter.MaxKeyLen)))
			return err
		}, codes.OK, "", ""},
		{"a key too long", func() error { _, err := limiter.Check(ctx, check("api", long)); return err },
			codes.InvalidArgument, "key too long: 1025 bytes, at most 1024", "key_length"},
		{"a key too long in a batch", func() error {
			_, err := limiter.CheckBatch(ctx, batch(5, 3, check("api", long)))
			return err
		}, codes.InvalidArgument, "checks[3]: key too long: 1025 bytes, at most 1024", "key_length"},
		{"a rule name too long", func() error { _, err := limiter.Check(ctx, check(longRule, "k")); return err },
			codes.InvalidArgument, "rule name too long: 131 bytes, at most 130", "rule_length"},
		{"a rule name too long in a batch", func() error {
			_, err := limiter.CheckBatch(ctx, batch(2, 0, check(longRule, "k")))
			return err
		}, codes.InvalidArgument, "checks[0]: rule name too long: 131 bytes, at most 130", "rule_length"},
		{"a batch at the bound", func() error { _, err := limiter.CheckBatch(ctx, batch(MaxBatchChecks, 0, nil)); return err },
			codes.OK, "", ""},
		{"a batch too large", func() error { _, err := limiter.CheckBatch(ctx, batch(MaxBatchChecks+1, 0, nil)); return err },
			codes.InvalidArgument, "checks: 1001 checks in a batch, at most 1000", "batch_size"},
		{"a message too large", func() error {
			_, err := limiter.Check(ctx, check("api", strings.Repeat("k", MaxMessageSize)))
			return err
		}, codes.ResourceExhausted, "larger than max", "message_size"},
		// Parsed whole, and then refused for its sender, whom this node
		// (without gossip) cannot know for a member: not for its size.
		{"a delta at the bound", func() error { return sync(delta(wire.MaxDeltaEntries, "peer:")) },
			codes.FailedPrecondition, "runs no gossip", ""},
		{"a delta of too many entries", func() error { return sync(delta(wire.MaxDeltaEntries+1, "flood:")) },
			codes.ResourceExhausted, `"flooder": delta too large: entries: 65537 in one delta, at most 65536`, "delta_size"},
		{"a delta message too large", func() error { return sync(delta(1, strings.Repeat("k", MaxMessageSize))) },
			codes.ResourceExhausted, "larger than max", "message_size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := refusals(n.Metrics())
			err := tt.call()
			st := status.Convert(err)
			if st.Code() != tt.code || !strings.Contains(st.Message(), tt.message) {
				t.Fatalf("%v; want %v naming %q", err, tt.code, tt.message)
			}
			after := refusals(n.Metrics())
			for reason, v := range after {
				want := before[reason]
				if reason == tt.reason {
					want++
				}
				if v != want {
					t.Errorf("sluice_requests_refused_total{reason=%q} went from %d to %d, want %d", reason, before[reason], v, want)
				}
			}
		})
	}
}

// TestSplitDeltas: a delta of more entries than a peer takes in one goes
// to it as several of at most wire.SplitEntries each, with its sequence
// number and ack, which together carry every entry.
func TestSplitDeltas(t *testing.T) {
	from := counter.Incarnation{Node: "a", Boot: 1}
	for _, entries := range []int{1, wire.SplitEntries, wire.SplitEntries + 1, 3*wire.SplitEntries + 7, wire.MaxDeltaEntries + 1} {
		t.Run(strconv.Itoa(entries), func(t *testing.T) {
			d := &counter.Delta{From: from, Seq: 42, Ack: 17, Live: 3, Incarnations: []counter.Incarnation{from}}
			for r, rule := range []string{"a", "b"} {
				rd := counter.RuleDelta{Rule: rule}
				for i := range entries/2 + r*(entries%2) {
					rd.Entries = append(rd.Entries, counter.Entry{Key: rule + strconv.Itoa(i), Window: 100, Admitted: 1})
				}
				d.Rules = append(d.Rules, rd)
			}
			q := newQueued(d, 1, 0)
			if want := (d.Size() + wire.SplitEntries - 1) / wire.SplitEntries; len(q.msgs) != max(want, 1) {
				t.Fatalf("%d entries went in %d messages, want %d", d.Size(), len(q.msgs), want)
			}
			got := 0
			for _, m := range q.msgs {
				p, _, err := wire.ParseDelta(m)
				if err != nil {
					t.Fatal(err)
				}
				if p.Size() > wire.SplitEntries || p.Seq != d.Seq || p.Ack != d.Ack || p.Live != d.Live {
					t.Fatalf("a part of %d entries, seq %d, ack %d, live %d; want at most %d, %d, %d, %d",
						p.Size(), p.Seq, p.Ack, p.Live, wire.SplitEntries, d.Seq, d.Ack, d.Live)
				}
				got += p.Size()
			}
			if got != d.Size() || q.entries != d.Size() {
				t.Fatalf("the parts carry %d entries (queued as %d), want %d", got, q.entries, d.Size())
			}
		})
	}
}
