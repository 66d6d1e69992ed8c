-- tidemark reconcile on Spark: recompute window aggregates from raw_events
-- and MERGE them into window_results, for lakes that outgrow one machine.
--
-- Variables (spark-sql --hivevar / -d):
--   lake        lake root, e.g. s3a://bucket/lake or /data/lake
--   window_s    window length in seconds (the lake's tidemark.windowUs / 1e6)
--   slide_s     slide in seconds (= window_s for tumbling windows)
--   key_cols    the --key columns, comma-separated, e.g. page,region
--   key_join    the key match, e.g. t.page <=> s.page AND t.region <=> s.region
--   from_ts     only windows starting at or after this timestamp
--   to_ts       ... and before this one
--   watermark   windows ending at or before this are closed; default below:
--               the highest watermark the stream recorded in window_results
--
-- Semantics equal tidemark reconcile's range mode (--from/--to): every closed
-- window of the range is recomputed from ALL raw_events rows (ok and late);
-- rows that differ are updated with origin='batch', revision+1, watermark
-- NULL; windows the stream never emitted (only late rows) are inserted with
-- revision 1. Keys are matched null-safely (<=>), as tidemark groups a row
-- without a key field under null. Windows are half-open [start, end), aligned
-- to the Unix epoch, as WindowSpec.Assign defines them.
--
-- Unlike tidemark reconcile this does not write reconcile_log rows nor the
-- progress txns, so a later `tidemark reconcile` re-checks (and finds equal)
-- the windows this merged.

CREATE OR REPLACE TEMPORARY VIEW closed_watermark AS
SELECT COALESCE(
         max(watermark),
         TIMESTAMP '0001-01-01 00:00:00'
       ) AS w
FROM delta.`${lake}/window_results`
WHERE origin = 'stream';

-- Every (row, window) pair: a row belongs to each window whose start is a
-- multiple of slide in (event_time - window, event_time]. Only the event
-- hours that can hold the range's windows are read (partition pruning).
CREATE OR REPLACE TEMPORARY VIEW recomputed AS
WITH rows AS (
  SELECT event_time, value, ${key_cols},
         CAST(floor(unix_micros(event_time) / (${slide_s} * 1000000)) AS BIGINT) AS last_k
  FROM delta.`${lake}/raw_events`
  WHERE event_time >= TIMESTAMP '${from_ts}'
    AND event_time < TIMESTAMP '${to_ts}' + make_interval(0, 0, 0, 0, 0, 0, ${window_s})
),
assigned AS (
  SELECT r.*, timestamp_micros((last_k - n) * ${slide_s} * 1000000) AS window_start
  FROM rows r
  LATERAL VIEW explode(sequence(0, CAST(ceil(${window_s} / ${slide_s}) AS INT) - 1)) AS n
)
SELECT window_start,
       window_start + make_interval(0, 0, 0, 0, 0, 0, ${window_s}) AS window_end,
       ${key_cols},
       count(*)   AS `count`,
       sum(value) AS `sum`,
       min(value) AS `min`,
       max(value) AS `max`
FROM assigned
WHERE event_time < window_start + make_interval(0, 0, 0, 0, 0, 0, ${window_s})
  AND window_start >= TIMESTAMP '${from_ts}'
  AND window_start < TIMESTAMP '${to_ts}'
  AND window_start + make_interval(0, 0, 0, 0, 0, 0, ${window_s}) <= (SELECT w FROM closed_watermark)
GROUP BY window_start, ${key_cols};

-- The merge: the sum is compared with a relative tolerance of 1e-9 (Spark
-- and tidemark add in different orders); count, min and max exactly.
MERGE INTO delta.`${lake}/window_results` AS t
USING (SELECT *, date_format(window_start, 'yyyy-MM-dd') AS window_date FROM recomputed) AS s
ON  t.window_date = s.window_date
AND t.window_start = s.window_start
AND t.window_end = s.window_end
AND ${key_join}
WHEN MATCHED AND (
       t.`count` <> s.`count`
    OR NOT (t.`min` <=> s.`min`)
    OR NOT (t.`max` <=> s.`max`)
    OR (t.`sum` IS NULL) <> (s.`sum` IS NULL)
    OR abs(t.`sum` - s.`sum`) > 1e-9 * greatest(abs(t.`sum`), abs(s.`sum`), abs(s.`min`), abs(s.`max`))
  ) THEN UPDATE SET
    t.`count` = s.`count`, t.`sum` = s.`sum`, t.`min` = s.`min`, t.`max` = s.`max`,
    t.final = true, t.origin = 'batch', t.revision = t.revision + 1,
    t.computed_at = current_timestamp(), t.watermark = NULL
WHEN NOT MATCHED THEN INSERT
    (window_start, window_end, ${key_cols}, `count`, `sum`, `min`, `max`,
     final, origin, revision, computed_at, watermark, window_date)
  VALUES
    (s.window_start, s.window_end, ${key_cols_s}, s.`count`, s.`sum`, s.`min`, s.`max`,
     true, 'batch', 1, current_timestamp(), NULL, s.window_date);
