//go:build !linux

package lake

import "os"

// writeback is the data file itself where sync_file_range does not exist:
// the publish's fsync writes the whole file out.
type writeback struct{ *os.File }

func newWriteback(f *os.File) *writeback { return &writeback{f} }
