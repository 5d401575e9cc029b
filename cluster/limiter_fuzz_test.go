package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/counter"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
)

// fuzzRules are the rules FuzzLimiterRequests checks against. multi's
// further limit has the larger count, so that its first count bounds its
// hits.
var fuzzRules = []window.Rule{
	{Name: "fixed", Count: 3, Window: 10 * time.Second, Type: window.Fixed},
	{Name: "sliding", Count: 1_000_000, Window: time.Second},
	{Name: "multi", Count: 5, Window: time.Second, Type: window.Fixed,
		Also: []window.Limit{{Count: 50, Window: 10 * time.Second}}},
}

// fuzzRuleNames are what a check of FuzzLimiterRequests may name, beside
// the input's own rule.
var fuzzRuleNames = []string{"fixed", "sliding", "multi", "nope", "", "fixed\xff", "fixed#2", "multi#2"}

// FuzzLimiterRequests sends requests built from the input through the
// node's server codec (as the node's gRPC server decodes them) to the
// Limiter service's Check and CheckBatch: a check of the input's rule, key
// and hits; a batch of it and the checks the input's more describes; and
// the input's raw bytes as a check and as a batch. It checks that nothing
// panics; that a request written by hand decodes to the rule, key and
// hits written, UTF-8 or not, and any bytes as protobuf-go decodes them
// (or, where it refuses them for their UTF-8 alone, at all); that a refusal is InvalidArgument, NotFound
// or ResourceExhausted with a message in UTF-8 that names the field (and
// in a batch the check's index), and is the one the documented bounds
// predict; and that an accepted request's checks are all within those
// bounds (a rule of the node, a key of 1 to 1024 bytes of UTF-8, hits
// from 0 to the count, at most 1000 checks) and decided within them.
func FuzzLimiterRequests(f *testing.F) {
	f.Add("fixed", "user:42", int64(1), []byte(nil), []byte(nil))
	f.Add("fixed", "user:\xff", int64(1), []byte{1, 0, 'k', 0, 2, 9, 'k'}, wireCheck("fixed", "\xc3", 2))
	f.Add("fixed\xff", "k", int64(0), []byte{3, 3, 0xe2, 0x82}, wireBatch(wireCheck("multi", "k", 5)))
	f.Add("nope", "", int64(-1), []byte{0xff}, []byte{0x0a, 0x80})
	f.Add("multi", strings.Repeat("é", 512), int64(6), []byte{2, 4, 'x', 0, 6, 1, 'y'}, wireCheck("", "", 0))
	f.Add("sliding", strings.Repeat("k", counter.MaxKeyLen), int64(1_000_000), []byte{0, 3}, wireBatch(nil, nil))

	clock := &svcClock{}
	clock.ns.Store(svcEpoch)
	node, err := Start(context.Background(), Config{Name: "fuzz", Rules: fuzzRules, Now: clockOf(clock.Now),
		Logger: testLogger(f)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { node.Close() })
	svc := NewLimiterService(node)
	codec := newServerCodec()
	codec.lenient.accept(&sluicev1.CheckRequest{}, &sluicev1.CheckBatchRequest{})
	decode := func(b []byte, m proto.Message) error { return codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m) }

	f.Fuzz(func(t *testing.T, rule, key string, hits int64, more, raw []byte) {
		// Past every window of the rules: what one input spent does not
		// refuse the next, and the node's tables stay small.
		clock.Advance(time.Minute)
		ctx := context.Background()

		first := fuzzCheck{rule, key, hits}
		var one sluicev1.CheckRequest
		if err := decode(wireCheck(rule, key, hits), &one); err != nil {
			t.Fatalf("a check written by hand does not decode: %v", err)
		}
		if one.GetRule() != rule || one.GetKey() != key || one.GetHits() != hits {
			t.Fatalf("decoded %q %q %d, want %q %q %d", one.GetRule(), one.GetKey(), one.GetHits(), rule, key, hits)
		}
		resp, err := svc.Check(ctx, &one)
		checkAnswer(t, []fuzzCheck{first}, false, []*sluicev1.CheckResponse{resp}, err)

		checks := append([]fuzzCheck{first}, moreChecks(more, rule)...)
		if len(more) > 0 && more[0] == 0xff {
			for len(checks) <= MaxBatchChecks {
				checks = append(checks, first)
			}
		}
		wire := make([][]byte, len(checks))
		for i, c := range checks {
			wire[i] = wireCheck(c.rule, c.key, c.hits)
		}
		var batch sluicev1.CheckBatchRequest
		if err := decode(wireBatch(wire...), &batch); err != nil || len(batch.GetChecks()) != len(checks) {
			t.Fatalf("a batch of %d checks written by hand decodes to %d: %v", len(checks), len(batch.GetChecks()), err)
		}
		bresp, err := svc.CheckBatch(ctx, &batch)
		checkAnswer(t, checks, true, bresp.GetResults(), err)

		// Any bytes at all: decoded as protobuf decodes them, or, refused
		// by protobuf for a string that is not UTF-8 alone, with the bytes
		// sent; never a panic. What decodes is answered as the bounds say.
		for _, m := range []proto.Message{&sluicev1.CheckRequest{}, &sluicev1.CheckBatchRequest{}} {
			got, want := m, proto.Clone(m)
			gotErr, wantErr := decode(raw, got), proto.Unmarshal(raw, want)
			switch {
			case wantErr == nil && (gotErr != nil || !proto.Equal(got, want)):
				t.Fatalf("%q as %T: the server's codec read %v (%v), protobuf %v", raw, m, got, gotErr, want)
			case wantErr != nil && !invalidUTF8(wantErr) && gotErr == nil:
				t.Fatalf("%q as %T: the server's codec read %v, which protobuf refuses: %v", raw, m, got, wantErr)
			}
		}
		var rawOne sluicev1.CheckRequest
		if decode(raw, &rawOne) == nil {
			resp, err := svc.Check(ctx, &rawOne)
			checkAnswer(t, []fuzzCheck{{rawOne.GetRule(), rawOne.GetKey(), rawOne.GetHits()}}, false,
				[]*sluicev1.CheckResponse{resp}, err)
		}
		var rawBatch sluicev1.CheckBatchRequest
		if decode(raw, &rawBatch) == nil && !hasNil(rawBatch.GetChecks()) {
			got := make([]fuzzCheck, len(rawBatch.GetChecks()))
			for i, c := range rawBatch.GetChecks() {
				got[i] = fuzzCheck{c.GetRule(), c.GetKey(), c.GetHits()}
			}
			bresp, err := svc.CheckBatch(ctx, &rawBatch)
			checkAnswer(t, got, true, bresp.GetResults(), err)
		}
	})
}

// fuzzCheck is one check of FuzzLimiterRequests.
type fuzzCheck struct {
	rule, key string
	hits      int64
}

func (c fuzzCheck) String() string {
	if len(c.key) > 40 {
		return fmt.Sprintf("{%q %q… (%d bytes) %d}", c.rule, c.key[:40], len(c.key), c.hits)
	}
	return fmt.Sprintf("{%q %q %d}", c.rule, c.key, c.hits)
}

// moreChecks reads the checks of a batch from more: segments split at
// each 0 byte, each a rule (the first byte picks the input's rule or one
// of fuzzRuleNames), hits (the second byte, as an int8), and a key (the
// rest).
func moreChecks(more []byte, rule string) []fuzzCheck {
	var out []fuzzCheck
	for seg := range strings.SplitSeq(string(more), "\x00") {
		if seg == "" {
			continue
		}
		c := fuzzCheck{rule: rule}
		if i := int(seg[0]) % (len(fuzzRuleNames) + 1); i < len(fuzzRuleNames) {
			c.rule = fuzzRuleNames[i]
		}
		if len(seg) > 1 {
			c.hits = int64(int8(seg[1]))
			c.key = seg[2:]
		}
		out = append(out, c)
	}
	return out
}

// hasNil reports whether a decoded batch holds no check where one is
// empty; the wire cannot say nil, so it never does.
func hasNil(checks []*sluicev1.CheckRequest) bool {
	for _, c := range checks {
		if c == nil {
			return true
		}
	}
	return false
}

// expectedRefusal is the status the documented bounds give a check: OK,
// or the code and the field its message must name.
func expectedRefusal(c fuzzCheck) (codes.Code, string) {
	var r *window.Rule
	for i := range fuzzRules {
		if fuzzRules[i].Name == c.rule {
			r = &fuzzRules[i]
		}
	}
	switch {
	case r == nil && len(c.rule) > counter.MaxRuleLen:
		return codes.InvalidArgument, "rule name too long"
	case r == nil && !utf8.ValidString(c.rule):
		return codes.InvalidArgument, "rule must be valid UTF-8"
	case r == nil:
		return codes.NotFound, "unknown rule"
	case c.key == "":
		return codes.InvalidArgument, "key must not be empty"
	case len(c.key) > counter.MaxKeyLen:
		return codes.InvalidArgument, "key too long"
	case c.hits < 0:
		return codes.InvalidArgument, "hits must be ≥ 0"
	case c.hits > r.Count:
		return codes.InvalidArgument, "hits exceed the rule's count"
	case !utf8.ValidString(c.key):
		return codes.InvalidArgument, "key must be valid UTF-8"
	}
	return codes.OK, ""
}

// checkAnswer checks the answer to checks, sent as a batch or as one
// Check, against the bounds.
func checkAnswer(t *testing.T, checks []fuzzCheck, batch bool, results []*sluicev1.CheckResponse, err error) {
	t.Helper()
	wantCode, wantText, prefix := codes.OK, "", ""
	if batch && len(checks) > MaxBatchChecks {
		wantCode, wantText = codes.InvalidArgument, fmt.Sprintf("checks: %d checks in a batch, at most %d", len(checks), MaxBatchChecks)
	} else {
		for i, c := range checks {
			if code, text := expectedRefusal(c); code != codes.OK {
				wantCode, wantText = code, text
				if batch {
					prefix = fmt.Sprintf("checks[%d]: ", i)
				}
				break
			}
		}
	}
	st := status.Convert(err)
	switch code := st.Code(); {
	case err != nil && code != codes.InvalidArgument && code != codes.NotFound && code != codes.ResourceExhausted:
		t.Fatalf("checks %v: refused %v, not InvalidArgument, NotFound or ResourceExhausted", checks, err)
	case code != wantCode || !strings.HasPrefix(st.Message(), prefix) || !strings.Contains(st.Message(), wantText):
		t.Fatalf("checks %v: %v, want %v naming %q%q", checks, err, wantCode, prefix, wantText)
	case !utf8.ValidString(st.Message()):
		t.Fatalf("checks %v: a message that is not UTF-8: %q", checks, st.Message())
	case err != nil:
		return
	}
	if len(results) != len(checks) {
		t.Fatalf("checks %v: %d results", checks, len(results))
	}
	for i, c := range checks {
		var r window.Rule
		for _, fr := range fuzzRules {
			if fr.Name == c.rule {
				r = fr
			}
		}
		res := results[i]
		limits := map[int64]bool{r.Count: true}
		for _, l := range r.Also {
			limits[l.Count] = true
		}
		switch {
		case !limits[res.GetLimit()]:
			t.Fatalf("check %v: limit %d is none of rule %q's", c, res.GetLimit(), r.Name)
		case res.GetRemaining() < 0 || res.GetRemaining() > res.GetLimit():
			t.Fatalf("check %v: remaining %d of %d", c, res.GetRemaining(), res.GetLimit())
		case res.GetAllowed() && res.GetRetryAfter().AsDuration() != 0,
			res.GetRetryAfter().AsDuration() < 0 || res.GetResetAfter().AsDuration() < 0:
			t.Fatalf("check %v: allowed %v, retry_after %v, reset_after %v", c, res.GetAllowed(),
				res.GetRetryAfter().AsDuration(), res.GetResetAfter().AsDuration())
		}
	}
}
