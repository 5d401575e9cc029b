package cluster

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	"github.com/sluicehq/sluice/counter"
	"github.com/sluicehq/sluice/window"
)

var syncCPUKeys = flag.Int("synccpu.keys", 10_000, "BenchmarkSyncCPU: keys every node changes every interval")

// BenchmarkSyncCPU measures one node's sync work per interval in a fleet of
// N nodes that all change the same 10,000 keys every interval, the worst
// case for owner allocation: every node reports every key it does not own,
// and each owner answers every node for the keys it owns. Timed is node 0's
// share alone, on the real path: its Tick, encoding and marshalling what it
// sends, and for everything it is sent, unmarshalling, decoding, Receive,
// and encoding the answers it replies with. The other nodes' work builds
// node 0's inbox untimed, before node 0's checks and Tick and apart from
// its inbox, so that node 0 runs with its own state in cache as a real node
// would. cores/node is that time over the sync interval.
// The collector is off while node 0 works and runs between intervals: the
// process holds all N nodes' state, which a real node's collector would not
// scan; B/op is what node 0 allocated in an interval, for its collector to
// free.
//
//	go test -run x -bench SyncCPU -benchtime 5x ./cluster
//	go test -run x -bench SyncCPU/256 -benchtime 5x ./cluster -synccpu.keys 2500
func BenchmarkSyncCPU(b *testing.B) {
	keys := *syncCPUKeys
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
			// A node pays for writing what it sends and reading what it is
			// sent: node 0's share is timed, its peers' is not.
			encode := func(d *counter.Delta) [][]byte { return newQueued(d, 1, 0).msgs }
			parse := func(msg []byte) *counter.Delta {
				got, _, err := wire.ParseDelta(msg)
				if err != nil {
					b.Fatal(err)
				}
				return got
			}
			now := start
			var sentEntries, gotEntries, bytes int64
			interval := func(timed bool) {
				now += int64(rule.SyncInterval)
				// Every node checks every key once in the interval and the
				// others run their rounds, all before node 0's checks and
				// round: a real node's caches hold its own keys, not the
				// other nodes' this process also keeps.
				check := func(r *counter.Replica) {
					for _, k := range names {
						if _, err := r.Allow(now-1, rule.Name, k, 1); err != nil {
							b.Fatal(err)
						}
					}
				}
				for _, r := range nodes[1:] {
					check(r)
				}
				inbox := map[int][]*counter.Delta{}
				for _, r := range nodes[1:] {
					for _, o := range r.Tick(now) {
						j := index[o.To]
						inbox[j] = append(inbox[j], o.Delta)
					}
				}
				check(nodes[0])
				if timed {
					b.StartTimer()
				}
				var out []counter.Outbound
				pprof.Do(context.Background(), pprof.Labels("node", "0"), func(context.Context) { out = nodes[0].Tick(now) })
				sent := make([][][]byte, len(out))
				for i, o := range out {
					sent[i] = encode(o.Delta)
					if timed {
						sentEntries += int64(o.Delta.Size())
						for _, m := range sent[i] {
							bytes += int64(len(m))
						}
					}
				}
				if timed {
					b.StopTimer()
				}
				for i, o := range out {
					for _, m := range sent[i] {
						inbox[index[o.To]] = append(inbox[index[o.To]], parse(m))
					}
				}
				// Deliver: node 0's inbox on the wire and timed, the rest
				// directly; replies go back the same way.
				for len(inbox) > 0 {
					next := map[int][]*counter.Delta{}
					// Node 0 takes its inbox in one go, as a real node does,
					// not between the other nodes' work.
					order := make([]int, 0, len(inbox))
					for j := range inbox {
						order = append(order, j)
					}
					slices.Sort(order)
					for _, j := range order {
						timedHere := timed && j == 0
						var msgs [][]byte
						deltas := inbox[j]
						if j == 0 {
							// What node 0 is sent, in the wire form its
							// senders wrote.
							for _, d := range inbox[j] {
								msgs = append(msgs, encode(d)...)
							}
							deltas = make([]*counter.Delta, len(msgs))
						}
						if timedHere {
							// One timed stretch for node 0's whole inbox:
							// the timer's own bookkeeping between deltas
							// would stop the world hundreds of times.
							b.StartTimer()
						}
						for k, d := range deltas {
							var res counter.ReceiveResult
							var err error
							if j == 0 {
								pprof.Do(context.Background(), pprof.Labels("node", "0"), func(context.Context) {
									d = parse(msgs[k])
									res, err = nodes[j].Receive(now, d)
									if !timed {
										return
									}
									gotEntries += int64(d.Size())
									bytes += int64(len(msgs[k]))
									if err == nil && res.Reply != nil {
										for _, m := range encode(res.Reply.Delta) {
											bytes += int64(len(m))
										}
										sentEntries += int64(res.Reply.Delta.Size())
									}
								})
							} else {
								res, err = nodes[j].Receive(now, d)
							}
							if err != nil {
								b.Fatal(err)
							}
							if res.Reply != nil {
								to := index[res.Reply.To]
								next[to] = append(next[to], res.Reply.Delta)
							}
						}
						if timedHere {
							b.StopTimer()
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
			b.ReportMetric(float64(sentEntries)/float64(b.N)/float64(keys), "sent/key")
			b.ReportMetric(float64(gotEntries)/float64(b.N)/float64(keys), "received/key")
			b.ReportMetric(float64(bytes)*8/rule.SyncInterval.Seconds()/float64(b.N)/1e6, "Mbit/s")
		})
	}
}
