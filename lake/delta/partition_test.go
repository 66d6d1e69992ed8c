package delta

import "testing"

func TestPartitionPaths(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		cols    []string
		values  map[string]*string
		dir     string
		logPath string // EncodePath(dir + "/f.parquet"), as Spark writes it
	}{
		{[]string{"c1", "c2"}, map[string]*string{"c1": s("4"), "c2": s("c")}, "c1=4/c2=c", "c1=4/c2=c/f.parquet"},
		{[]string{"as_timestamp"}, map[string]*string{"as_timestamp": s("2021-09-08 11:11:11")},
			"as_timestamp=2021-09-08 11%3A11%3A11", "as_timestamp=2021-09-08%2011%253A11%253A11/f.parquet"},
		{[]string{"as_int"}, map[string]*string{"as_int": nil}, "as_int=__HIVE_DEFAULT_PARTITION__", "as_int=__HIVE_DEFAULT_PARTITION__/f.parquet"},
		{[]string{"event_date", "event_hour"}, map[string]*string{"event_date": s("2026-01-01"), "event_hour": s("07")},
			"event_date=2026-01-01/event_hour=07", "event_date=2026-01-01/event_hour=07/f.parquet"},
	} {
		dir := PartitionDir(tc.cols, tc.values)
		if dir != tc.dir {
			t.Errorf("dir: got %q, want %q", dir, tc.dir)
		}
		lp := EncodePath(dir + "/f.parquet")
		if lp != tc.logPath {
			t.Errorf("log path: got %q, want %q", lp, tc.logPath)
		}
		if got, want := (Add{Path: lp}).Key("tbl"), "tbl/"+dir+"/f.parquet"; got != want {
			t.Errorf("key: got %q, want %q", got, want)
		}
	}
}
