package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/window"
)

// A single embedded node: 100 requests per second per key, sliding. A rule
// that sets no SyncInterval is batched at window.DefaultSyncInterval.
func ExampleStart() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "api", Count: 100, Window: time.Second, Type: window.Sliding}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	d, err := node.Allow(ctx, "api", "user:42", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Allowed, d.Limit, d.Remaining)
	// Output: true 100 99
}

// A check that names a rule the node does not have is an error to match
// with errors.Is, not a refusal.
func ExampleNode_Allow_unknownRule() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "api", Count: 100, Window: time.Second}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	_, err = node.Allow(ctx, "apj", "user:42", 1)
	fmt.Println(errors.Is(err, cluster.ErrUnknownRule))
	// Output: true
}

// Metrics are read as values, one moment's copy of the node's counters.
func ExampleNode_Metrics() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "api", Count: 100, Window: time.Second}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	m := node.Metrics()
	fmt.Println(m.Members, m.Peers, m.Borrows)
	// Output: 1 0 0
}

// fakeClock is a clock for examples: it stays where it is set, so that
// their output does not depend on when they run.
type fakeClock struct{ at time.Time }

func (c *fakeClock) Now() time.Time { return c.at }

// A handle on one rule finds a misspelt rule once, when it is taken, and
// then checks keys without naming the rule again.
func ExampleNode_Limiter() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "api", Count: 100, Window: time.Second}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	if _, err := node.Limiter("apj"); errors.Is(err, cluster.ErrUnknownRule) {
		fmt.Println(err)
	}
	api, err := node.Limiter("api")
	if err != nil {
		log.Fatal(err)
	}
	d, err := api.Allow(ctx, "user:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Allowed, d.Remaining)
	// Output:
	// sluice: limiter: unknown rule "apj"
	// true 99
}

// Three requests a minute per key, in fixed windows: the fourth is refused
// and told when the window ends. The node runs on a fake clock, 10 s into
// a minute.
func ExampleLimiter_Allow() {
	ctx := context.Background()
	clock := &fakeClock{at: time.Date(2030, 1, 1, 12, 0, 10, 0, time.UTC)}
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "login", Count: 3, Window: time.Minute, Type: window.Fixed}},
		Now:   clock.Now,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	login, err := node.Limiter("login")
	if err != nil {
		log.Fatal(err)
	}

	for range 4 {
		d, err := login.Allow(ctx, "user:42")
		if err != nil {
			log.Fatal(err)
		}
		if !d.Allowed {
			fmt.Printf("refused: retry in %v, at %s\n", d.RetryAfter, d.RetryAt().UTC().Format(time.TimeOnly))
			continue
		}
		fmt.Printf("allowed: %d left\n", d.Remaining)
	}
	// Output:
	// allowed: 2 left
	// allowed: 1 left
	// allowed: 0 left
	// refused: retry in 50s, at 12:01:00
}

// Wait blocks until the hits fit, sleeping for the wait each refusal names;
// hits beyond the rule's count fail at once instead of waiting forever.
func ExampleLimiter_Wait() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{
			{Name: "export", Count: 2, Window: 100 * time.Millisecond, Type: window.Fixed},
			{Name: "report", Count: 1, Window: time.Hour, Type: window.Sliding},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	export, err := node.Limiter("export")
	if err != nil {
		log.Fatal(err)
	}

	// Five jobs of one hit each take three windows at most; none is refused.
	for range 5 {
		if err := export.Wait(ctx, "tenant:7", 1); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("5 jobs done")

	err = export.Wait(ctx, "tenant:7", 3)
	fmt.Println(errors.Is(err, cluster.ErrHitsOverCount))

	// One report an hour, in a sliding window: after one, the next fits
	// an hour on at the earliest, so a Wait with a deadline sooner fails
	// at once.
	report, err := node.Limiter("report")
	if err != nil {
		log.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	fmt.Println(report.Wait(short, "tenant:7", 1))
	err = report.Wait(short, "tenant:7", 1)
	fmt.Println(errors.Is(err, context.DeadlineExceeded), short.Err())
	// Output:
	// 5 jobs done
	// true
	// <nil>
	// true <nil>
}

// A reservation takes the hits before the work; Cancel gives them back if
// the work is not done, so the key can be checked again.
func ExampleLimiter_Reserve() {
	ctx := context.Background()
	clock := &fakeClock{at: time.Date(2030, 1, 1, 12, 0, 10, 0, time.UTC)}
	node, err := cluster.Start(ctx, cluster.Config{
		Rules: []window.Rule{{Name: "upload", Count: 10, Window: time.Minute, Type: window.Fixed}},
		Now:   clock.Now,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	upload, err := node.Limiter("upload")
	if err != nil {
		log.Fatal(err)
	}

	r, err := upload.Reserve(ctx, "user:42", 8)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.OK(), r.Decision().Remaining)

	// The upload failed before it started: its 8 hits go back.
	fmt.Println(r.Cancel(), r.Cancel())

	d, err := upload.AllowN(ctx, "user:42", 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Remaining)
	// Output:
	// true 2
	// true false
	// 10
}
