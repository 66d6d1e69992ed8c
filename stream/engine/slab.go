package engine

// slab holds the engine's slots in fixed chunks of slabChunk, so growing
// it never copies: a slice grown by append moves every slot to a new array
// each time it fills, by 1.25x once it is large, which for a per-user state
// of 222k slots (12 MB) allocated and copied about five times the slab and
// was a fifth of the engine's time in the per-user run. A chunk is
// allocated when the last one fills; the slack is at most one chunk.
type slab struct {
	chunks []*[slabChunk]slot // arrays, so at needs no bounds check within one
	n      int32              // slots in use: indices 0..n-1
}

const (
	slabShift = 10
	slabChunk = 1 << slabShift // 1024 slots, 56 KiB
)

// at returns slot i, which must be below len.
func (s *slab) at(i int32) *slot {
	return &s.chunks[i>>slabShift][i&(slabChunk-1)]
}

// matches reports whether the slot is the pair (seq, key id).
func (s *slot) matches(seq uint32, kid int32) bool { return s.key == kid && s.seq() == seq }

// len returns the number of slots in use.
func (s *slab) len() int { return int(s.n) }

// push adds a zero slot at the end and returns its index.
func (s *slab) push() int32 {
	i := s.n
	if int(i>>slabShift) == len(s.chunks) {
		s.chunks = append(s.chunks, new([slabChunk]slot))
	}
	s.n++
	*s.at(i) = slot{}
	return i
}

// truncate empties the slab, keeping its chunks for reuse.
func (s *slab) truncate() { s.n = 0 }
