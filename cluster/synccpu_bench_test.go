package cluster

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

// BenchmarkSyncCPU measures one node's sync work per interval in a fleet of
// N nodes that all change the same 10,000 keys every interval, the worst
// case for owner allocation: every node reports every key it does not own,
// and each owner answers every node for the keys it owns. Timed is node 0's
// share alone, on the real path: its Tick, encoding and marshalling what it
// sends, and for everything it is sent, unmarshalling, decoding, Receive,
// and encoding the answers it replies with. The other nodes' work builds
// node 0's inbox untimed. cores/node is that time over the sync interval.
// The collector is off while node 0 works and runs between intervals: the
// process holds all N nodes' state, which a real node's collector would not
// scan; B/op is what node 0 allocated in an interval, for its collector to
// free.
//
//	go test -run x -bench SyncCPU -benchtime 5x ./cluster
func BenchmarkSyncCPU(b *testing.B) {
	const keys = 10_000
	for _, n := range []int{3, 16, 64, 256} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			rule := window.Rule{Name: "api", Count: 1 << 30, Window: time.Hour, Type: window.Sliding,
				SyncInterval: 200 * time.Millisecond}
			start := (int64(1_800_000_000)*int64(time.Second)/int64(rule.Window) + 1) * int64(rule.Window)
			nodes := make([]*counter.Replica, n)
			incs := make([]counter.Incarnation, n)
			index := map[counter.Incarnation]int{}
			for i := range nodes {
				incs[i] = counter.Incarnation{Node: "node-" + strconv.Itoa(i), Boot: 1}
				index[incs[i]] = i
				r, err := counter.NewReplica(counter.Config{Self: incs[i], Rules: []window.Rule{rule}, Start: start})
				if err != nil {
					b.Fatal(err)
				}
				nodes[i] = r
			}
			for _, r := range nodes {
				r.SetPeers(incs)
			}
			names := make([]string, keys)
			for k := range names {
				names[k] = "user:" + strconv.Itoa(1_000_000+k)
			}
			// wire is the real path a delta takes: written in its wire form
			// on the sender (a peer's queue holds that), read from it on the
			// receiver.
			wire := func(d *counter.Delta) (*counter.Delta, int) {
				q := newQueued(d, 1, 0)
				got, _, err := parseDelta(q.msg)
				if err != nil {
					b.Fatal(err)
				}
				return got, len(q.msg)
			}
			now := start
			var sentEntries, gotEntries, bytes int64
			interval := func(timed bool) {
				now += int64(rule.SyncInterval)
				// Every node checks every key once in the interval.
				for _, r := range nodes {
					for _, k := range names {
						if _, err := r.Allow(now-1, rule.Name, k, 1); err != nil {
							b.Fatal(err)
						}
					}
				}
				if timed {
					b.StartTimer()
				}
				var out []counter.Outbound
				pprof.Do(context.Background(), pprof.Labels("node", "0"), func(context.Context) { out = nodes[0].Tick(now) })
				sent := make([]*counter.Delta, len(out))
				for i, o := range out {
					var size int
					sent[i], size = wire(o.Delta)
					sentEntries += int64(o.Delta.Size())
					bytes += int64(size)
				}
				if timed {
					b.StopTimer()
				}
				inbox := map[int][]*counter.Delta{}
				for i, o := range out {
					inbox[index[o.To]] = append(inbox[index[o.To]], sent[i])
				}
				for _, r := range nodes[1:] {
					for _, o := range r.Tick(now) {
						j := index[o.To]
						inbox[j] = append(inbox[j], o.Delta)
					}
				}
				// Deliver: node 0's inbox on the wire and timed, the rest
				// directly; replies go back the same way.
				for len(inbox) > 0 {
					next := map[int][]*counter.Delta{}
					for j, ds := range inbox {
						for _, d := range ds {
							timedHere := timed && j == 0
							var res counter.ReceiveResult
							var err error
							if timedHere {
								b.StartTimer()
								pprof.Do(context.Background(), pprof.Labels("node", "0"), func(context.Context) {
									var size int
									d, size = wire(d)
									gotEntries += int64(d.Size())
									bytes += int64(size)
									res, err = nodes[j].Receive(now, d)
								})
							} else {
								res, err = nodes[j].Receive(now, d)
							}
							if err != nil {
								b.Fatal(err)
							}
							var reply *counter.Delta
							if res.Reply != nil {
								reply = res.Reply.Delta
								if timedHere {
									bytes += int64(len(newQueued(reply, 1, 0).msg))
									sentEntries += int64(reply.Size())
								}
							}
							if timedHere {
								b.StopTimer()
							}
							if reply != nil {
								to := index[res.Reply.To]
								next[to] = append(next[to], reply)
							}
						}
					}
					inbox = next
				}
			}
			// Two untimed intervals let grants and accounts settle.
			b.StopTimer()
			interval(false)
			interval(false)
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			b.ResetTimer()
			b.StopTimer()
			b.ReportAllocs()
			for range b.N {
				runtime.GC()
				interval(true)
			}
			perInterval := float64(b.Elapsed()) / float64(b.N)
			b.ReportMetric(perInterval/float64(rule.SyncInterval), "cores/node")
			b.ReportMetric(float64(sentEntries)/float64(b.N)/keys, "sent/key")
			b.ReportMetric(float64(gotEntries)/float64(b.N)/keys, "received/key")
			b.ReportMetric(float64(bytes)*8/rule.SyncInterval.Seconds()/float64(b.N)/1e6, "Mbit/s")
		})
	}
}
