package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/cluster"
)

// TransportRedisLua checks a sliding window kept in Redis by a Lua script
// (slidingScript), each check one EVALSHA, over Concurrency connections to
// the Redis at Targets: the exact limiter users run today, for reference.
const TransportRedisLua = "redis-lua"

// slidingScript is a sliding-window counter as sluice counts one: the
// window's count and the previous window's, weighed by how much of it is
// left, against the limit. KEYS[1] is the key; ARGV are the limit, the
// window in microseconds and the hits. It answers {1, remaining} when it
// admits and {0, 0} when it refuses. Redis's own clock decides, as one
// Redis would for every client.
const slidingScript = `
local limit, window, hits = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local idx = math.floor(now / window)
local cur = KEYS[1] .. ':' .. idx
local c = tonumber(redis.call('GET', cur) or '0')
local p = tonumber(redis.call('GET', KEYS[1] .. ':' .. (idx - 1)) or '0')
local est = p * (1 - (now % window) / window) + c
if est + hits > limit then
  return {0, 0}
end
redis.call('INCRBY', cur, hits)
redis.call('PEXPIRE', cur, math.ceil(2 * window / 1000))
return {1, math.floor(limit - est - hits)}
`

// maxRedisBulk bounds a bulk reply the bench reads: the script's SHA-1 is
// all it expects.
const maxRedisBulk = 1 << 16

// redisConn is one connection to Redis, speaking RESP: enough of it for
// SCRIPT LOAD and EVALSHA.
type redisConn struct {
	c   net.Conn
	r   *bufio.Reader
	w   *bufio.Writer
	buf []byte // the command being written, kept between commands
}

func dialRedis(ctx context.Context, addr string) (*redisConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &redisConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

// do sends one command and reads its reply: a string, an integer, or an
// array of integers.
func (rc *redisConn) do(ctx context.Context, args ...string) (any, error) {
	if dl, ok := ctx.Deadline(); ok {
		rc.c.SetDeadline(dl)
	} else {
		rc.c.SetDeadline(time.Time{})
	}
	// Written by hand rather than with fmt: the client shares the machine
	// with the Redis it measures.
	b := append(rc.buf[:0], '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	rc.buf = b
	if _, err := rc.w.Write(b); err != nil {
		return nil, err
	}
	if err := rc.w.Flush(); err != nil {
		return nil, err
	}
	return rc.reply()
}

func (rc *redisConn) reply() (any, error) {
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 {
		return nil, fmt.Errorf("redis: short reply %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, errors.New("redis: " + body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		if n > maxRedisBulk {
			return nil, fmt.Errorf("redis: a bulk reply of %d bytes, more than the bench reads", n)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		out := make([]int64, 0, min(max(n, 0), 16)) // n is the peer's word: grow as replies come
		for range n {
			v, err := rc.reply()
			if err != nil {
				return nil, err
			}
			i, ok := v.(int64)
			if !ok {
				return nil, fmt.Errorf("redis: array of %T, want integers", v)
			}
			out = append(out, i)
		}
		return out, nil
	}
	return nil, fmt.Errorf("redis: reply %q", line)
}

// redisChecks opens c.Concurrency connections to the Redis at c.Targets[0],
// loads slidingScript, and returns a check that runs it on a free
// connection, and a function that closes them.
func redisChecks(ctx context.Context, c *ThroughputConfig) (checkFunc, func(), error) {
	pool := make(chan *redisConn, c.Concurrency)
	closeAll := func() {
		for {
			select {
			case rc := <-pool:
				rc.c.Close()
			default:
				return
			}
		}
	}
	var sha string
	for range c.Concurrency {
		rc, err := dialRedis(ctx, c.Targets[0])
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("redis at %s: %w", c.Targets[0], err)
		}
		if sha == "" {
			v, err := rc.do(ctx, "SCRIPT", "LOAD", slidingScript)
			s, ok := v.(string)
			if err != nil || !ok {
				rc.c.Close()
				closeAll()
				return nil, nil, fmt.Errorf("redis at %s: SCRIPT LOAD: %v", c.Targets[0], err)
			}
			sha = s
		}
		pool <- rc
	}
	limit, win := strconv.FormatInt(c.Limit, 10), strconv.FormatInt(c.Window.Microseconds(), 10)
	check := func(ctx context.Context, keys []string, hits int64, ds []cluster.Decision) error {
		rc := <-pool
		defer func() { pool <- rc }()
		v, err := rc.do(ctx, "EVALSHA", sha, "1", keys[0], limit, win, strconv.FormatInt(hits, 10))
		if err != nil {
			return err
		}
		a, ok := v.([]int64)
		if !ok || len(a) != 2 {
			return fmt.Errorf("redis: script answered %v", v)
		}
		ds[0] = cluster.Decision{Allowed: a[0] == 1, Limit: c.Limit, Remaining: a[1], Path: pathUnknown}
		return nil
	}
	return check, closeAll, nil
}
