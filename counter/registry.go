package counter

import "sync"

// registry gives each incarnation a small id, so that slots name their peers
// with four bytes instead of a string.
type registry struct {
	mu   sync.Mutex
	incs []Incarnation
	ids  map[Incarnation]uint32
}

func newRegistry() *registry { return &registry{ids: make(map[Incarnation]uint32)} }

func (r *registry) id(inc Incarnation) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.ids[inc]; ok {
		return id
	}
	id := uint32(len(r.incs))
	r.incs = append(r.incs, inc)
	r.ids[inc] = id
	return id
}

func (r *registry) list() []Incarnation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Incarnation(nil), r.incs...)
}

func (r *registry) inc(id uint32) Incarnation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.incs[id]
}

// lookup returns inc's id without giving it one.
func (r *registry) lookup(inc Incarnation) (uint32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.ids[inc]
	return id, ok
}

// len returns how many incarnations have an id.
func (r *registry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.incs)
}
