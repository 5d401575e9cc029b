package cluster

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/sluicehq/sluice/cluster/internal/wire"
	sluicev1 "github.com/sluicehq/sluice/proto/sluice/v1"
	"github.com/sluicehq/sluice/window"
	"google.golang.org/protobuf/proto"
)

// maxMetaSize is memberlist's limit on node metadata.
const maxMetaSize = 512

// nodeMeta is what a node gossips about itself.
type nodeMeta struct {
	grpcAddr  string
	boot      uint64
	rulesHash uint64
	raftAddr  string // empty for a node without strict rules
	raftID    string // the node's strict server ID; empty means its name
}

func (m nodeMeta) encode() ([]byte, error) {
	b, err := proto.Marshal(&sluicev1.NodeMeta{GrpcAddr: m.grpcAddr, Boot: m.boot, RulesHash: m.rulesHash, RaftAddr: m.raftAddr, RaftId: m.raftID})
	if err != nil {
		return nil, err
	}
	if len(b) > maxMetaSize {
		return nil, fmt.Errorf("node metadata is %d bytes, memberlist allows %d: shorten the gRPC address", len(b), maxMetaSize)
	}
	return b, nil
}

// decodeMeta reads a peer's metadata; it never panics on bad input.
func decodeMeta(b []byte) (nodeMeta, error) {
	var m sluicev1.NodeMeta
	if err := proto.Unmarshal(b, &m); err != nil {
		return nodeMeta{}, fmt.Errorf("node metadata: %w", err)
	}
	if m.GetGrpcAddr() == "" {
		return nodeMeta{}, fmt.Errorf("node metadata has no gRPC address")
	}
	if err := CheckHostPort("grpc_addr", m.GetGrpcAddr()); err != nil {
		return nodeMeta{}, fmt.Errorf("node metadata: %w", err)
	}
	if m.GetRaftAddr() != "" {
		if err := CheckHostPort("raft_addr", m.GetRaftAddr()); err != nil {
			return nodeMeta{}, fmt.Errorf("node metadata: %w", err)
		}
	}
	return nodeMeta{grpcAddr: m.GetGrpcAddr(), boot: m.GetBoot(), rulesHash: m.GetRulesHash(), raftAddr: m.GetRaftAddr(),
		raftID: m.GetRaftId()}, nil
}

// rulesHash identifies a rule set, independent of rule order, so that nodes
// can tell when their configurations have drifted apart.
func rulesHash(rules []window.Rule) uint64 {
	var sum uint64
	for _, r := range rules {
		h := fnv.New64a()
		h.Write([]byte(r.Name))
		var b [8]byte
		for _, v := range []uint64{uint64(r.Count), uint64(r.Window), uint64(r.Type), uint64(r.SyncInterval),
			uint64(wire.AllocationNumber(r.Allocation)), uint64(r.FailMode)} {
			binary.LittleEndian.PutUint64(b[:], v)
			h.Write(b[:])
		}
		// Summing per-rule hashes makes the order of rules irrelevant.
		sum += h.Sum64()
	}
	if sum == 0 {
		sum = math.MaxUint64
	}
	return sum
}
