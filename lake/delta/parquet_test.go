package delta

import (
	"context"
	"runtime/metrics"
	"strings"
	"testing"

	"tidemark/lake/store"
)

func allocatedBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A corrupt checkpoint whose trailer declares a huge footer is refused
// before parquet-go allocates it (it took 789 MiB for "PAR1PAR1").
func TestCheckpointCorruptTrailer(t *testing.T) {
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, data := range []string{"PAR1PAR1", "PAR1\xff\xff\xff\xffPAR1", "PAR1" + strings.Repeat("x", 100) + "\xf0\xff\xff\x7fPAR1", "short", "PAR1" + strings.Repeat("y", 20)} {
		key := "t/_delta_log/00000000000000000100.checkpoint.parquet"
		if err := st.Put(ctx, key, strings.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		before := allocatedBytes()
		_, err := readCheckpointFile(ctx, st, key)
		if err == nil {
			t.Errorf("checkpoint %q: got no error", data)
		}
		if n := allocatedBytes() - before; n > 16<<20 {
			t.Errorf("checkpoint %q: allocated %d MiB to fail", data, n>>20)
		}
	}
	if err := CheckParquetTrailer(strings.NewReader("PAR1\x00\x00\x00\x00PAR1"), 12); err != nil {
		t.Errorf("an empty footer that fits: %v", err)
	}
}
