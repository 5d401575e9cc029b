package sim

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// The chart has a bar per node and second that admitted anything, the
// total as a line through every second, the limit's share of a second as
// a dashed line, and a dotted line where each window starts; and it is
// well-formed XML.
func TestWriteSVG(t *testing.T) {
	c := Defaults()
	c.Nodes, c.Duration, c.Window, c.Limit = 3, 6*time.Second, 2*time.Second, 1000
	r, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := r.WriteSVG(&b, &c); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	checkXML(t, svg)
	bars := 0
	for _, s := range r.Seconds {
		for _, a := range s.PerNode {
			if a > 0 {
				bars++
			}
		}
	}
	// One rect is the white background.
	if got := strings.Count(svg, "<rect ") - 1; got != bars {
		t.Errorf("%d bars, want one per node-second that admitted anything: %d", got, bars)
	}
	if got := strings.Count(svg, `class="window"`); got != 4 {
		t.Errorf("%d window lines, want 4 (at 0, 2, 4 and 6 s)", got)
	}
	if !strings.Contains(svg, `class="limit"`) || !strings.Contains(svg, "limit/window 500") {
		t.Error("no limit line labelled with the limit's share of a second, 500")
	}
	total := svg[strings.Index(svg, `class="total" points="`):]
	total = total[len(`class="total" points="`):strings.Index(total, `" fill`)]
	if got := len(strings.Fields(total)); got != len(r.Seconds) {
		t.Errorf("total line through %d points, want one per second: %d", got, len(r.Seconds))
	}
}

// The report holds the scenario, the summary, the chart and a row per
// window, and is one well-formed document.
func TestWriteHTML(t *testing.T) {
	c := Defaults()
	c.Nodes, c.Duration = 4, 5*time.Second
	r, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := r.WriteHTML(&b, &c); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<!doctype html>", "<title>sluice: 4 nodes, 500 per 1s sliding, owner allocation</title>",
		`<table class="scenario">`, "<td>800 requests/s, even uniform</td>", `<table class="summary">`,
		"<svg ", `class="limit"`, `<table class="windows">`, "</html>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the report has no %q", want)
		}
	}
	windows := page[strings.Index(page, `<table class="windows">`):]
	if got := strings.Count(windows, "<tr><td>"); got != len(r.Windows) {
		t.Errorf("%d window rows, want %d", got, len(r.Windows))
	}
	// Past the doctype, the page is XML as well as HTML.
	checkXML(t, strings.TrimPrefix(page, "<!doctype html>\n"))
}

// checkXML fails t unless doc is well-formed XML.
func checkXML(t *testing.T, doc string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
	}
}
