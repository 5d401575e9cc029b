package bench

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The RESP replies the bench reads, and the errors it must name.
func TestRedisReply(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
		err  string
	}{
		{"+OK\r\n", "OK", ""},
		{":42\r\n", int64(42), ""},
		{"$3\r\nabc\r\n", "abc", ""},
		{"*2\r\n:1\r\n:-5\r\n", []int64{1, -5}, ""},
		{"-NOSCRIPT No matching script\r\n", nil, "redis: NOSCRIPT"},
		{"*1\r\n+OK\r\n", nil, "array of string"},
		{"?\r\n", nil, "redis: reply"},
		{"$x\r\n", nil, "invalid syntax"},
		{"\r\n", nil, "short reply"},
		{"$99999999\r\n", nil, "more than the bench reads"},
	} {
		rc := &redisConn{r: bufio.NewReader(strings.NewReader(tc.in))}
		got, err := rc.reply()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
}

// FuzzRedisReply feeds any bytes as a reply: an answer or an error, never
// a panic.
func FuzzRedisReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", ":1\r\n", "$2\r\nab\r\n", "*2\r\n:1\r\n:0\r\n", "*-1\r\n", "$-1\r\n", "*3\r\n*1\r\n:1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rc := &redisConn{r: bufio.NewReader(strings.NewReader(string(b)))}
		_, _ = rc.reply()
	})
}

// Against a real Redis (Debian's redis-server, where it is installed) the
// script is one exact limiter: a count of 10 on one key admits 10 checks.
func TestThroughputRedisLua(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a Redis for 1 s")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server here (apt-get install redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(patience)
	for {
		rc, err := dialRedis(context.Background(), addr)
		if err == nil {
			_, err = rc.do(context.Background(), "PING")
			rc.c.Close()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s not answering: %v", addr, err)
		}
		<-time.After(20 * time.Millisecond)
	}
	c := ThroughputDefaults()
	c.Transport, c.Targets, c.Concurrency, c.Keys = TransportRedisLua, []string{addr}, 8, 1
	c.Limit, c.Window, c.Duration, c.Warmup = 10, time.Hour, time.Second, 0
	res, err := Throughput(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Admitted != 10 || res.Decisions <= 10 {
		t.Errorf("%d decisions, %d admitted, %d errors (%s); want exactly 10 of a count of 10 admitted", res.Decisions, res.Admitted, res.Errors, res.FirstError)
	}
}
