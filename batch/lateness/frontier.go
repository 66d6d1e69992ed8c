package lateness

import "tidemark"

// Frontier is what a Replayer may also do (cmd wires engine.Engine, which
// does): cap a source's watermark at an event time, as the stream caps it
// at the frontier of its aligned reading (ingest.Position.Frontier).
type Frontier interface {
	SetFrontier(source string, frontier int64, held bool)
}

// The stream reads a source's files aligned on event time: its watermark
// follows the file that lags most among those with data still to read,
// not the newest event read from any of them (batch 0 reads a line of
// every file). A replay in arrival order without that cap lets events read
// ahead from other files carry the watermark past the lagging file, and
// drops most of it: 71% of the rows of 8 hour-files that one file holding
// the same events drops none of. So the replay caps each source with
// several files as the stream did: at the end of each batch, the smallest
// newest event time over the source's files seen so far whose last row is
// still to come (a file read to its end holds no more). A live file that
// the stream had read to its end and still held (until --idle-timeout) is
// not seen as holding: the replay errs toward dropping more there.
type replayFrontier struct {
	last  map[fileID]row // each file's last row in arrival order
	files map[fileID]*replayFile
	multi map[uint32]bool // sources with several files
	srt   *sorter
	// The file of the last row seen, its state (nil: its source has one
	// file) and last row: rows come in runs of one file.
	cur     fileID
	curFile *replayFile
	curLast row
	hasCur  bool
}

type fileID struct{ source, file uint32 }

type replayFile struct {
	max  int64
	done bool
}

// lastRows is kept by the sorter as rows are added: each file's last row
// in arrival order.
// Rows come in runs of one file: the run's file and last row are kept
// aside (curFile, curRow) and written to the map when the file changes.
func (s *sorter) noteLast(r row) {
	k := fileID{r.source, r.file}
	if s.hasCur && k == s.curFile {
		if s.compare(&s.curRow, &r) < 0 {
			s.curRow = r
		}
		return
	}
	s.flushLast()
	if prev, ok := s.lastRow[k]; ok && s.compare(&r, &prev) < 0 {
		r = prev
	}
	s.curFile, s.curRow, s.hasCur = k, r, true
}

// flushLast writes the current run's last row to the map.
func (s *sorter) flushLast() {
	if !s.hasCur {
		return
	}
	if s.lastRow == nil {
		s.lastRow = map[fileID]row{}
	}
	s.lastRow[s.curFile] = s.curRow
	s.hasCur = false
}

// newReplayFrontier returns nil when no source has several files.
func newReplayFrontier(srt *sorter) *replayFrontier {
	srt.flushLast()
	count := map[uint32]int{}
	for k := range srt.lastRow {
		count[k.source]++
	}
	multi := map[uint32]bool{}
	for src, n := range count {
		if n > 1 {
			multi[src] = true
		}
	}
	if len(multi) == 0 {
		return nil
	}
	return &replayFrontier{last: srt.lastRow, files: map[fileID]*replayFile{}, multi: multi, srt: srt}
}

// see takes a row of the batch being gathered.
func (f *replayFrontier) see(r *row) {
	if k := (fileID{r.source, r.file}); !f.hasCur || k != f.cur {
		f.cur, f.curFile, f.hasCur = k, nil, true
		if f.multi[r.source] {
			f.curFile, f.curLast = f.files[k], f.last[k]
			if f.curFile == nil {
				f.curFile = &replayFile{max: r.event}
				f.files[k] = f.curFile
			}
		}
	}
	rf := f.curFile
	if rf == nil {
		return
	}
	rf.max = max(rf.max, r.event)
	if *r == f.curLast {
		rf.done = true
	}
}

// apply caps every engine's sources at their frontiers after the batch.
func (f *replayFrontier) apply(engines []Replayer) {
	frontier := map[uint32]int64{}
	for k, rf := range f.files {
		if rf.done {
			continue
		}
		if t, ok := frontier[k.source]; !ok || rf.max < t {
			frontier[k.source] = rf.max
		}
	}
	for src := range f.multi {
		t, held := frontier[src]
		if !held {
			t = tidemark.MinTime
		}
		for _, e := range engines {
			if fe, ok := e.(Frontier); ok {
				fe.SetFrontier(f.srt.names[src], t, held)
			}
		}
	}
}
