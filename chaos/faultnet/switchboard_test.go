package faultnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// patience bounds what a test waits for. Nothing waited on takes more than
// a few seconds on an idle machine; memberlist on a machine busy with the
// race detector and other packages' tests can take several probe and
// push-pull rounds to converge, so the bound only turns a hang into a
// failure.
const patience = time.Minute

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newBoard returns a switchboard closed with the test.
func newBoard(t *testing.T, seed int64) *Switchboard {
	t.Helper()
	sb := New(seed)
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("closing the switchboard: %v", err)
		}
	})
	return sb
}

// pair dials a stream from node a to a listener of node b and returns both
// ends.
func pair(t *testing.T, sb *Switchboard, a, b string) (dialed, accepted net.Conn) {
	t.Helper()
	lis, err := sb.Node(b).Listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	got := make(chan net.Conn, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			close(got)
			return
		}
		got <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dialed, err = sb.Node(a).Dial(ctx, lis.Addr().String())
	if err != nil {
		t.Fatalf("dial %s → %s: %v", a, b, err)
	}
	accepted, ok := <-got
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { dialed.Close(); accepted.Close() })
	return dialed, accepted
}

// readN reads n bytes from c, failing the test past within.
func readN(t *testing.T, c net.Conn, n int, within time.Duration) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return buf
}

func TestPartitionBlocksDialsUntilHeal(t *testing.T) {
	sb := newBoard(t, 1)
	lis, err := sb.Node("b").Listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	if got := sb.Owner(lis.Addr().String()); got != "b" {
		t.Fatalf("owner of b's listener is %q", got)
	}

	sb.Partition([]string{"a"}, []string{"b"})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = sb.Node("a").Dial(ctx, lis.Addr().String())
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial across the cut: err %v, want the dial's deadline", err)
	}
	if sb.Stats().DialsBlocked.Load() == 0 {
		t.Error("a blocked dial was not counted")
	}

	// A dial under way when the cut heals connects, as a retried SYN would.
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := sb.Node("a").Dial(ctx, lis.Addr().String())
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	waitFor(t, patience, "the second dial to block", func() bool { return sb.Stats().DialsBlocked.Load() == 2 })
	sb.Heal()
	if err := <-done; err != nil {
		t.Fatalf("dial after the heal: %v", err)
	}
}

// A node named in no group is alone.
func TestPartitionLeavesUnnamedNodesAlone(t *testing.T) {
	sb := newBoard(t, 1)
	sb.Partition([]string{"a", "b"})
	for _, tt := range []struct {
		from, to string
		cut      bool
	}{
		{"a", "b", false}, {"b", "a", false}, {"a", "c", true}, {"c", "a", true}, {"c", "d", true}, {"c", "c", false},
	} {
		if got := sb.Cut(tt.from, tt.to); got != tt.cut {
			t.Errorf("Cut(%s, %s) = %v, want %v", tt.from, tt.to, got, tt.cut)
		}
	}
	sb.Heal()
	if sb.Cut("a", "c") {
		t.Error("Heal left a cut")
	}
}

func TestPartitionStallsStreamsUntilHeal(t *testing.T) {
	sb := newBoard(t, 1)
	ac, bc := pair(t, sb, "a", "b")
	if _, err := ac.Write([]byte("before")); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, bc, 6, 10*time.Second); string(got) != "before" {
		t.Fatalf("read %q", got)
	}

	sb.Partition([]string{"a"}, []string{"b"})
	// Writes return: the bytes wait in the send queue, as in a socket's.
	for _, w := range []struct {
		c   net.Conn
		msg string
	}{{ac, "a→b"}, {bc, "b→a"}} {
		if _, err := w.c.Write([]byte(w.msg)); err != nil {
			t.Fatalf("write across the cut: %v", err)
		}
	}
	// Nothing crosses while the cut lasts, however long the reader waits.
	_ = bc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := bc.Read(make([]byte, 16))
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read across the cut: %d bytes, err %v; want a timeout", n, err)
	}
	_ = bc.SetReadDeadline(time.Time{})

	sb.Heal()
	if got := readN(t, bc, len("a→b"), 10*time.Second); string(got) != "a→b" {
		t.Errorf("b read %q after the heal", got)
	}
	if got := readN(t, ac, len("b→a"), 10*time.Second); string(got) != "b→a" {
		t.Errorf("a read %q after the heal", got)
	}
}

// Closing a stream delivers what was written, then EOF.
func TestCloseFlushesThenEOF(t *testing.T) {
	sb := newBoard(t, 1)
	ac, bc := pair(t, sb, "a", "b")
	sb.Delay("a", "b", 20*time.Millisecond)
	if _, err := ac.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := ac.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after close: %v, want net.ErrClosed", err)
	}
	_ = bc.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(bc)
	if err != nil || string(got) != "last words" {
		t.Fatalf("peer read %q, %v; want the bytes then EOF", got, err)
	}
}

func TestStreamDelayAddsAtLeastD(t *testing.T) {
	sb := newBoard(t, 1)
	ac, bc := pair(t, sb, "a", "b")
	const d = 80 * time.Millisecond
	sb.Delay("a", "b", d)
	for range 3 {
		start := time.Now()
		if _, err := ac.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		readN(t, bc, 4, 10*time.Second)
		if took := time.Since(start); took < d {
			t.Errorf("a write arrived after %v, before the %v delay", took, d)
		}
	}
	// The other direction is not delayed: a round trip only pays one way.
	start := time.Now()
	if _, err := bc.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	readN(t, ac, 4, 10*time.Second)
	t.Logf("undelayed direction: %v", time.Since(start))
}

// Loss on a stream costs time, never bytes or their order.
func TestStreamLossRetransmitsInOrder(t *testing.T) {
	sb := newBoard(t, 7)
	ac, bc := pair(t, sb, "a", "b")
	sb.Drop("a", "b", 0.3)
	var want bytes.Buffer
	for i := range 40 {
		msg := []byte{byte(i), byte(i * 7), byte(i * 13)}
		want.Write(msg)
		if _, err := ac.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	got := readN(t, bc, want.Len(), 60*time.Second)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("the stream's bytes arrived changed or out of order")
	}
	if sb.Stats().Retransmits.Load() == 0 {
		t.Error("30% loss over 40 segments retransmitted nothing")
	}
}

// gossipPair returns memberlist transports for nodes a and b.
func gossipPair(t *testing.T, sb *Switchboard) (ta, tb memberlist.Transport) {
	t.Helper()
	var err error
	if ta, err = sb.Node("a").Gossip("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if tb, err = sb.Node("b").Gossip("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ta.Shutdown(); tb.Shutdown() })
	return ta, tb
}

func gossipAddr(t *testing.T, tr memberlist.Transport) string {
	t.Helper()
	ip, port, err := tr.FinalAdvertiseAddr("", 0)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(port))
}

// received drains the packets waiting on tr.
func received(tr memberlist.Transport) int {
	n := 0
	for {
		select {
		case <-tr.PacketCh():
			n++
		default:
			return n
		}
	}
}

func TestPartitionDropsPacketsAndHealRestores(t *testing.T) {
	sb := newBoard(t, 1)
	ta, tb := gossipPair(t, sb)
	to := gossipAddr(t, tb)

	if _, err := ta.WriteTo([]byte("hello"), to); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-tb.PacketCh():
		if string(p.Buf) != "hello" || p.From.String() != gossipAddr(t, ta) {
			t.Fatalf("got %q from %v", p.Buf, p.From)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a packet on a healthy link did not arrive")
	}

	sb.Partition([]string{"a"}, []string{"b"})
	for range 100 {
		ta.WriteTo([]byte("lost"), to)
	}
	if got := sb.Stats().PacketsCut.Load(); got != 100 {
		t.Errorf("%d of 100 packets across the cut were dropped", got)
	}
	if n := received(tb); n != 0 {
		t.Errorf("%d packets crossed the cut", n)
	}
	// A gossip stream across the cut fails like a dial to a silent host.
	if _, err := ta.DialTimeout(to, 50*time.Millisecond); err == nil {
		t.Error("a gossip stream crossed the cut")
	}

	sb.Heal()
	for range 10 {
		ta.WriteTo([]byte("back"), to)
	}
	if n := received(tb); n != 10 {
		t.Errorf("%d of 10 packets arrived after the heal", n)
	}
	c, err := ta.DialTimeout(to, 10*time.Second)
	if err != nil {
		t.Fatalf("gossip stream after the heal: %v", err)
	}
	c.Close()
}

func TestDropRateFromSeed(t *testing.T) {
	const packets, p = 20_000, 0.2
	dropped := func(seed int64) (int64, []bool) {
		sb := newBoard(t, seed)
		ta, tb := gossipPair(t, sb)
		to := gossipAddr(t, tb)
		sb.Drop("a", "b", p)
		var fates []bool
		for range packets {
			before := sb.Stats().PacketsDropped.Load()
			ta.WriteTo([]byte("x"), to)
			fates = append(fates, sb.Stats().PacketsDropped.Load() > before)
			received(tb)
		}
		// The other direction is not lossy.
		for range 100 {
			tb.WriteTo([]byte("y"), gossipAddr(t, ta))
		}
		if n := received(ta); n != 100 {
			t.Errorf("b → a lost %d of 100 packets with no drop set", 100-n)
		}
		return sb.Stats().PacketsDropped.Load(), fates
	}
	n, fates := dropped(42)
	rate := float64(n) / packets
	t.Logf("dropped %d of %d packets (%.3f) at p = %.2f", n, packets, rate, p)
	if rate < p-0.02 || rate > p+0.02 {
		t.Errorf("drop rate %.3f, want %.2f ± 0.02", rate, p)
	}
	// The same seed drops the same packets.
	n2, fates2 := dropped(42)
	if n2 != n {
		t.Fatalf("seed 42 dropped %d, then %d", n, n2)
	}
	for i := range fates {
		if fates[i] != fates2[i] {
			t.Fatalf("packet %d: dropped %v, then %v under the same seed", i, fates[i], fates2[i])
		}
	}
}

func TestPacketDelayAddsAtLeastD(t *testing.T) {
	sb := newBoard(t, 1)
	ta, tb := gossipPair(t, sb)
	const d = 60 * time.Millisecond
	sb.Delay("a", "b", d)
	for range 5 {
		sent := time.Now()
		ta.WriteTo([]byte("x"), gossipAddr(t, tb))
		select {
		case p := <-tb.PacketCh():
			if got := p.Timestamp.Sub(sent); got < d {
				t.Errorf("packet arrived %v after it was sent, within the %v delay", got, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a delayed packet never arrived")
		}
	}
}

func TestClockSkew(t *testing.T) {
	sb := newBoard(t, 1)
	a, b := sb.Clock("a"), sb.Clock("b")
	sb.SkewClock("b", 100*time.Millisecond)
	before := sb.Now()
	ta, tb := a().UnixNano(), b().UnixNano()
	after := sb.Now()
	if ta < before || ta > after {
		t.Errorf("an unskewed clock read %d outside [%d, %d]", ta, before, after)
	}
	if tb < before+int64(100*time.Millisecond) || tb > after+int64(100*time.Millisecond) {
		t.Errorf("a clock 100 ms ahead read %d, outside [%d, %d] + 100 ms", tb, before, after)
	}
	sb.SkewClock("b", -100*time.Millisecond)
	if got := b().UnixNano(); got > sb.Now()-int64(100*time.Millisecond) {
		t.Errorf("a clock 100 ms behind reads %d, now is %d", got, sb.Now())
	}
	w := time.Second
	boundary := sb.AlignNext(w, 50*time.Millisecond)
	if boundary%int64(w) != 0 {
		t.Errorf("AlignNext returned %d, not a window boundary", boundary)
	}
	if now := sb.Now(); now > boundary || now < boundary-int64(w) {
		t.Errorf("after AlignNext now is %d, boundary %d", now, boundary)
	}
}

// Two memberlists on the switchboard find each other; a third cannot join
// across a cut.
func TestMemberlistOverTheSwitchboard(t *testing.T) {
	sb := newBoard(t, 1)
	start := func(name string) *memberlist.Memberlist {
		tr, err := sb.Node(name).Gossip("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c := memberlist.DefaultLocalConfig()
		c.Name, c.Transport = name, tr
		c.LogOutput = io.Discard
		ml, err := memberlist.Create(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ml.Shutdown() })
		return ml
	}
	a, b := start("a"), start("b")
	addrOf := func(ml *memberlist.Memberlist) string {
		n := ml.LocalNode()
		return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	}
	if _, err := b.Join([]string{addrOf(a)}); err != nil {
		t.Fatalf("b joining a: %v", err)
	}
	waitFor(t, patience, "a and b to see each other", func() bool {
		return a.NumMembers() == 2 && b.NumMembers() == 2
	})

	c := start("c")
	sb.Partition([]string{"a", "b"}, []string{"c"})
	if n, err := c.Join([]string{addrOf(a)}); err == nil || n != 0 {
		t.Errorf("c joined across the cut: %d contacted, err %v", n, err)
	}
	sb.Heal()
	if _, err := c.Join([]string{addrOf(a)}); err != nil {
		t.Fatalf("c joining after the heal: %v", err)
	}
	waitFor(t, patience, "all three to see each other", func() bool {
		return a.NumMembers() == 3 && b.NumMembers() == 3 && c.NumMembers() == 3
	})
}

// Close releases every goroutine the switchboard started, even with
// streams stalled across a cut and packets still delayed.
func TestCloseReleasesEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	sb := New(1)
	lis, err := sb.Node("b").Listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := lis.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	ac, err := sb.Node("a").Dial(context.Background(), lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	bc := <-accepted
	ta, _ := sb.Node("a").Gossip("127.0.0.1:0")
	tb, _ := sb.Node("b").Gossip("127.0.0.1:0")
	sb.Delay("a", "b", time.Hour)
	ta.WriteTo([]byte("held"), gossipAddr(t, tb))
	sb.Partition([]string{"a"}, []string{"b"})
	ac.Write([]byte("stalled"))
	ac.Close()
	blocked := make(chan error, 1)
	go func() {
		_, err := sb.Node("a").Dial(context.Background(), lis.Addr().String())
		blocked <- err
	}()
	waitFor(t, patience, "the dial to block", func() bool { return sb.Stats().DialsBlocked.Load() > 0 })

	if err := sb.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-blocked; err == nil {
		t.Error("a dial blocked across the cut succeeded after Close")
	}
	if _, err := bc.Read(make([]byte, 1)); err == nil {
		t.Error("a stream read after Close")
	}
	if _, err := sb.Node("c").Listen(context.Background(), "127.0.0.1:0"); !errors.Is(err, ErrClosed) {
		t.Errorf("listen after Close: %v, want ErrClosed", err)
	}
	waitFor(t, patience, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestListenOnlyOnLoopback(t *testing.T) {
	sb := newBoard(t, 1)
	if _, err := sb.Node("a").Listen(context.Background(), "0.0.0.0:0"); err == nil {
		t.Error("listened on every interface")
	}
	if _, err := sb.Node("a").Gossip("192.0.2.1:0"); err == nil {
		t.Error("gossiped on a non-loopback address")
	}
}

// TestAddressOwnedIsInUse claims for one node an address the switchboard
// still gives another (its listener is closing): the error is EADDRINUSE,
// as the kernel's would be, so that a caller retries on another port.
func TestAddressOwnedIsInUse(t *testing.T) {
	sb := New(1)
	defer sb.Close()
	if err := sb.register("127.0.0.1:9", "a"); err != nil {
		t.Fatal(err)
	}
	if err := sb.register("127.0.0.1:9", "a"); err != nil {
		t.Errorf("its owner claims the address again: %v", err)
	}
	err := sb.register("127.0.0.1:9", "b")
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("another node claims an owned address: %v, want EADDRINUSE", err)
	}
}
