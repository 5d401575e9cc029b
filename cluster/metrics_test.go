package cluster

import (
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestMetricsSnapshotReadsEveryCounter sets every live counter to a value
// of its own and checks that the snapshot carries each under its name, so a
// counter added to one struct and not the other fails here.
func TestMetricsSnapshotReadsEveryCounter(t *testing.T) {
	c := newCounters()
	cv := reflect.ValueOf(c).Elem()
	for i := range cv.NumField() {
		cv.Field(i).Addr().Interface().(*atomic.Int64).Store(int64(100 + i))
	}
	m := c.snapshot()
	mv := reflect.ValueOf(m)
	if mv.NumField() != cv.NumField() {
		t.Fatalf("Metrics has %d fields, counters %d", mv.NumField(), cv.NumField())
	}
	for i := range cv.NumField() {
		name := cv.Type().Field(i).Name
		f := mv.FieldByName(name)
		if !f.IsValid() {
			t.Errorf("Metrics has no field %s", name)
			continue
		}
		if got := f.Int(); got != int64(100+i) {
			t.Errorf("Metrics.%s = %d, want %d", name, got, 100+i)
		}
	}
	var out strings.Builder
	if err := m.WritePrometheus(&out); err != nil {
		t.Fatal(err)
	}
	// Every counter but none twice: each value appears in the text once.
	for i := range cv.NumField() {
		if n := strings.Count(out.String(), " "+strconv.Itoa(100+i)+"\n"); n != 1 {
			t.Errorf("%s (%d) appears %d times in the Prometheus text", cv.Type().Field(i).Name, 100+i, n)
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
