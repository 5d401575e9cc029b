package bench

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/cluster"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
)

// batchAnswer reads what proto.Unmarshal reads of a CheckBatchResponse:
// the results, and each one's allowed and remaining.
func TestBatchAnswerParse(t *testing.T) {
	resp := &sluicev1.CheckBatchResponse{Results: []*sluicev1.CheckResponse{
		{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: durationpb.New(1e9), RetryAfter: durationpb.New(0), Path: "local"},
		{Allowed: false, Limit: 10, Remaining: 0, RetryAfter: durationpb.New(3e8), Shadowed: true},
		{},
		{Allowed: true, Remaining: -1},
	}}
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	checkParse(t, b)
	checkParse(t, nil)
}

// FuzzBatchAnswer feeds any bytes: parse never panics, and wherever
// proto.Unmarshal takes them as a CheckBatchResponse, parse agrees.
func FuzzBatchAnswer(f *testing.F) {
	for _, r := range [][]*sluicev1.CheckResponse{nil, {{Allowed: true, Remaining: 4}}, {{}, {Allowed: true, Remaining: 1 << 40}}} {
		b, _ := proto.Marshal(&sluicev1.CheckBatchResponse{Results: r})
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01, 0x0a})
	f.Fuzz(func(t *testing.T, b []byte) {
		var want sluicev1.CheckBatchResponse
		if proto.Unmarshal(b, &want) != nil {
			a := batchAnswer{ds: make([]cluster.Decision, 4)}
			_ = a.parse(b)
			return
		}
		checkParse(t, b)
	})
}

// checkParse parses b, which proto.Unmarshal takes, and compares.
func checkParse(t *testing.T, b []byte) {
	t.Helper()
	var want sluicev1.CheckBatchResponse
	if err := proto.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	a := batchAnswer{ds: make([]cluster.Decision, len(want.GetResults()))}
	if err := a.parse(b); err != nil {
		t.Fatalf("parse: %v; proto.Unmarshal took the bytes", err)
	}
	if a.n != len(want.GetResults()) {
		t.Fatalf("parse found %d results, proto.Unmarshal %d", a.n, len(want.GetResults()))
	}
	for i, r := range want.GetResults() {
		if d := a.ds[i]; d.Allowed != r.GetAllowed() || d.Remaining != r.GetRemaining() {
			t.Errorf("result %d: parse read allowed %v remaining %d, proto.Unmarshal %v %d",
				i, d.Allowed, d.Remaining, r.GetAllowed(), r.GetRemaining())
		}
	}
}
