package cluster

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
)

// TestMetricsSnapshotReadsEveryCounter sets every live counter to a value
// of its own and checks that the snapshot carries each under its name, so a
// counter added to one struct and not the other fails here.
func TestMetricsSnapshotReadsEveryCounter(t *testing.T) {
	c := newCounters()
	cv := reflect.ValueOf(c).Elem()
	// The counters, strict mode's (an embedded strictapi.Counters) among
	// them.
	var fields []reflect.StructField
	for _, f := range reflect.VisibleFields(cv.Type()) {
		if f.Type == reflect.TypeFor[atomic.Int64]() {
			fields = append(fields, f)
		}
	}
	for i, f := range fields {
		cv.FieldByIndex(f.Index).Addr().Interface().(*atomic.Int64).Store(int64(100 + i))
	}
	m := c.snapshot()
	mv := reflect.ValueOf(m)
	// ShadowRefusals is no counter: Node.Metrics sums it from the rules.
	if mv.NumField() != len(fields)+1 {
		t.Fatalf("Metrics has %d fields, counters %d and ShadowRefusals", mv.NumField(), len(fields))
	}
	for i, cf := range fields {
		f := mv.FieldByName(cf.Name)
		if !f.IsValid() {
			t.Errorf("Metrics has no field %s", cf.Name)
			continue
		}
		if got := f.Int(); got != int64(100+i) {
			t.Errorf("Metrics.%s = %d, want %d", cf.Name, got, 100+i)
		}
	}
	var out strings.Builder
	if err := m.WritePrometheus(&out); err != nil {
		t.Fatal(err)
	}
	// Every counter but none twice: each value appears in the text once.
	for i, cf := range fields {
		if n := strings.Count(out.String(), " "+strconv.Itoa(100+i)+"\n"); n != 1 {
			t.Errorf("%s (%d) appears %d times in the Prometheus text", cf.Name, 100+i, n)
		}
	}
}

// TestMetricsAreValues checks that what Node.Metrics returns cannot change
// the node's counters.
func TestMetricsAreValues(t *testing.T) {
	c := newCounters()
	c.Borrows.Store(5)
	m := c.snapshot()
	m.Borrows = 99
	if got := c.snapshot().Borrows; got != 5 {
		t.Fatalf("Borrows after changing a snapshot = %d, want 5", got)
	}
}

// TestRefusedHelp checks that the description of
// sluice_requests_refused_total says the bounds the node has.
func TestRefusedHelp(t *testing.T) {
	for _, want := range []string{
		fmt.Sprintf("more than %d checks", MaxBatchChecks),
		fmt.Sprintf("over %d bytes), rule_length", counter.MaxKeyLen),
		fmt.Sprintf("over %d bytes), message_size", counter.MaxRuleLen),
		fmt.Sprintf("over %d MiB", MaxMessageSize>>20),
		fmt.Sprintf("more than %d entries", wire.MaxDeltaEntries),
	} {
		if !strings.Contains(refusedHelp, want) {
			t.Errorf("the help of sluice_requests_refused_total does not say %q: %s", want, refusedHelp)
		}
	}
}
