package ingest

// Sizer is implemented by sources that know the raw size of each input they
// track, so a progress display can say how much of the input is still unread
// (the bar of `tidemark stream --once`). It is optional: a source without it
// simply has no known backlog. Like Read, it is not synchronised.
type Sizer interface {
	Sizes() []FileSize
}

// FileSize is the raw size of one file or object, keyed like FilePosition.Path.
type FileSize struct {
	Path string `json:"path"`
	// Size is the raw (on-disk, or listed) size: with Once, the size at Open
	// (what the source reads); otherwise the size at the last stat or listing.
	Size int64 `json:"size"`
	// Compressed inputs have offsets in the decompressed stream, which are
	// not comparable with Size.
	Compressed bool `json:"compressed,omitempty"`
}

var (
	_ Sizer = (*DirSource)(nil)
	_ Sizer = (*s3Source)(nil)
)

// Sizes implements Sizer, in path order.
func (d *DirSource) Sizes() []FileSize {
	out := make([]FileSize, 0, len(d.order))
	for _, rel := range d.order {
		st := d.files[rel]
		out = append(out, FileSize{Path: rel, Size: st.end(), Compressed: st.compressed})
	}
	return out
}

// Sizes implements Sizer, in key order.
func (s *s3Source) Sizes() []FileSize {
	out := make([]FileSize, 0, len(s.order))
	for _, rel := range s.order {
		o := s.objects[rel]
		out = append(out, FileSize{Path: rel, Size: o.size, Compressed: o.compressed})
	}
	return out
}
