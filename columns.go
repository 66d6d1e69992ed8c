package tidemark

// Column names the lake's tables use for their own fields. A --key or
// --value named like one of them would collide in raw_events or
// window_results, so configuration refuses it (see ReservedColumn).
var reservedColumns = map[string]bool{
	// raw_events
	"event_time": true, "arrival_time": true, "ingest_time": true, "value": true,
	"status": true, "disorder_us": true, "source": true, "file": true, "offset": true,
	"batch_id": true, "payload": true, "event_date": true, "event_hour": true,
	// window_results and reconcile_log
	"window_start": true, "window_end": true, "window_date": true, "count": true,
	"sum": true, "min": true, "max": true, "final": true, "origin": true,
	"revision": true, "computed_at": true, "watermark": true,
}

// ReservedColumn reports whether name is one of the lake's own column names
// and therefore cannot be used as a grouping key.
func ReservedColumn(name string) bool { return reservedColumns[name] }
