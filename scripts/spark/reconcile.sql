-- tidemark reconcile on Spark: recompute the closed windows of a range from
-- raw_events, write a reconcile_log row for each one that differs from
-- window_results, then MERGE the corrections into window_results: what
-- `tidemark reconcile --from T --to T` does (SPEC §9), for lakes that
-- outgrow one machine. Window lakes only (tumbling or sliding): a session
-- lake is refused. See README.md beside this file.
--
-- Variables (spark-sql -d name=value). `tidemark tables --lake L --spark`
-- prints every one but from_ts and to_ts, for the lake as it is now:
--   lake          lake root, e.g. s3a://bucket/lake or /data/lake
--   from_ts       windows starting at or after this UTC timestamp ...
--   to_ts         ... and before this one, e.g. '2026-01-04 00:00:00'
--   window_us     window length, µs (the tables' tidemark.windowUs)
--   slide_us      window slide, µs (tidemark.slideUs; = window_us: tumbling)
--   watermark_us  windows ending at or before this (µs since the epoch)
--                 are closed: the watermark `tidemark reconcile` would use
--                 now — the lowest of the active shards' on a lake several
--                 streams write (tables --spark --shard-idle D, as the
--                 streams' --shard-idle), never below the last reconcile's.
--                 A window with a final row in window_results is closed too.
--   run_seq       this run's txn version under the appId
--                 tidemark-reconcile.spark: one past window_results' last;
--                 rerun a failed job with the same run_seq
--   k_cols        the key columns, each after a comma: , `page`, `code`
--   k_cols_s      the same on s: , s.`page`, s.`code`
--   k_join        the null-safe key match: AND t.`page` <=> s.`page` AND ...
--   c_value       the value column, `value`, or CAST(NULL AS DOUBLE) on a lake
--                 without --value
--   c_<column>    the lake's name of each own column (`count`; `_tm_count`
--                 in a lake where a key took the name: docs/lake-format.md)
--
-- Names this script makes start with _tm_q_ (tm_ for its views): keys never
-- start with _tm_ and no own column is named q_..., so none collides.

SET spark.sql.session.timeZone=UTC;
-- Spark 3 writes INT96 timestamps by default; tidemark reads INT64 micros.
SET spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS;

-- The window_results rows of the range (pruned to its days by window_date).
CREATE OR REPLACE TEMPORARY VIEW tm_existing AS
SELECT unix_micros(${c_window_start}) AS _tm_q_start,
       unix_micros(${c_window_end}) AS _tm_q_end
       ${k_cols},
       ${c_count} AS _tm_q_count, ${c_sum} AS _tm_q_sum, ${c_min} AS _tm_q_min, ${c_max} AS _tm_q_max,
       ${c_final} AS _tm_q_final
FROM delta.`${lake}/window_results`
WHERE ${c_window_date} >= CAST(CAST(TIMESTAMP '${from_ts}' AS DATE) AS STRING)
  AND ${c_window_date} <= CAST(CAST(TIMESTAMP '${to_ts}' AS DATE) AS STRING)
  AND ${c_window_start} >= TIMESTAMP '${from_ts}'
  AND ${c_window_start} < TIMESTAMP '${to_ts}';

-- Guard: every stored window of the range must be one of the windows
-- window_us and slide_us define. A session lake (sessions start at their
-- first event) or wrong variables fail the job here, before any write.
SELECT raise_error(concat('tidemark: window_results holds the window starting ',
         CAST(timestamp_micros(_tm_q_start) AS STRING), ' and ending ', CAST(timestamp_micros(_tm_q_end) AS STRING),
         ', which is not one of the windows of window_us=${window_us} slide_us=${slide_us}: ',
         'a session lake (this script handles window lakes only: run tidemark reconcile) ',
         'or wrong variables (tidemark tables --lake L --spark prints them)')) AS tm_guard
FROM tm_existing
WHERE _tm_q_end - _tm_q_start <> ${window_us}
   OR (_tm_q_start % ${slide_us} + ${slide_us}) % ${slide_us} <> 0
LIMIT 1;

-- Every (row, window) pair of the raw rows that can fall in the range's
-- windows: event times in [from_ts, to_ts + window). raw_events is
-- partitioned by event_date and event_hour (strings, UTC): the filters on
-- them name partition columns only, so Delta skips every other partition's
-- files; the event_time filter cuts the edges. A row at t belongs to each
-- window [s, s + window) with s a multiple of slide in (t - window, t]
-- (WindowSpec.Assign): the latest start is t - (t mod slide), floored also
-- before 1970, and the others are slide apart.
CREATE OR REPLACE TEMPORARY VIEW tm_recomputed AS
WITH tm_rows AS (
  SELECT unix_micros(${c_event_time}) AS _tm_q_t, ${c_value} AS _tm_q_v, ${c_status} = 'late' AS _tm_q_late
         ${k_cols}
  FROM delta.`${lake}/raw_events`
  WHERE ${c_event_date} >= CAST(CAST(TIMESTAMP '${from_ts}' AS DATE) AS STRING)
    AND ${c_event_date} <= CAST(CAST(timestamp_micros(unix_micros(TIMESTAMP '${to_ts}') + ${window_us}) AS DATE) AS STRING)
    AND concat(${c_event_date}, ' ', ${c_event_hour}) >=
        concat(CAST(CAST(TIMESTAMP '${from_ts}' AS DATE) AS STRING), ' ', lpad(CAST(hour(TIMESTAMP '${from_ts}') AS STRING), 2, '0'))
    AND concat(${c_event_date}, ' ', ${c_event_hour}) <=
        concat(CAST(CAST(timestamp_micros(unix_micros(TIMESTAMP '${to_ts}') + ${window_us}) AS DATE) AS STRING), ' ',
               lpad(CAST(hour(timestamp_micros(unix_micros(TIMESTAMP '${to_ts}') + ${window_us})) AS STRING), 2, '0'))
    AND ${c_event_time} >= TIMESTAMP '${from_ts}'
    AND ${c_event_time} < timestamp_micros(unix_micros(TIMESTAMP '${to_ts}') + ${window_us})
),
tm_last AS (
  SELECT *, _tm_q_t - (_tm_q_t % ${slide_us} + ${slide_us}) % ${slide_us} AS _tm_q_last
  FROM tm_rows
),
tm_assigned AS (
  SELECT *, _tm_q_last - _tm_q_n * ${slide_us} AS _tm_q_start
  FROM (SELECT *, explode(sequence(0, CAST(ceil(${window_us} / ${slide_us}) AS BIGINT) - 1)) AS _tm_q_n FROM tm_last) tm_n
)
SELECT _tm_q_start, _tm_q_start + ${window_us} AS _tm_q_end
       ${k_cols},
       count(*) AS _tm_q_count, sum(_tm_q_v) AS _tm_q_sum, min(_tm_q_v) AS _tm_q_min, max(_tm_q_v) AS _tm_q_max,
       count_if(_tm_q_late) AS _tm_q_late_rows
FROM tm_assigned
WHERE _tm_q_t < _tm_q_start + ${window_us}
  AND _tm_q_start >= unix_micros(TIMESTAMP '${from_ts}')
  AND _tm_q_start < unix_micros(TIMESTAMP '${to_ts}')
GROUP BY _tm_q_start ${k_cols};

-- The corrections, computed once: the closed windows whose recomputation
-- differs from window_results (count, min and max exactly; the sum within
-- a relative 1e-9 of the magnitudes involved, as the engines add in
-- different orders: reconcile.sameAgg), or that it lacks. Keys match
-- null-safely: tidemark groups a row without a key field under null.
CACHE TABLE tm_corrections AS
SELECT s._tm_q_start, s._tm_q_end
       ${k_cols_s},
       s._tm_q_count, s._tm_q_sum, s._tm_q_min, s._tm_q_max, s._tm_q_late_rows,
       t._tm_q_count AS _tm_q_old_count, t._tm_q_sum AS _tm_q_old_sum,
       t._tm_q_min AS _tm_q_old_min, t._tm_q_max AS _tm_q_old_max
FROM tm_recomputed s
LEFT JOIN tm_existing t ON t._tm_q_start = s._tm_q_start ${k_join}
LEFT JOIN (SELECT DISTINCT _tm_q_start AS _tm_q_final_start FROM tm_existing WHERE _tm_q_final) f
       ON f._tm_q_final_start = s._tm_q_start
WHERE (s._tm_q_end <= ${watermark_us} OR f._tm_q_final_start IS NOT NULL)
  AND (t._tm_q_start IS NULL
       OR t._tm_q_count <> s._tm_q_count
       OR (t._tm_q_sum IS NULL) <> (s._tm_q_sum IS NULL)
       OR (s._tm_q_sum IS NOT NULL AND t._tm_q_sum IS NOT NULL AND (
              NOT (t._tm_q_min <=> s._tm_q_min)
           OR NOT (t._tm_q_max <=> s._tm_q_max)
           OR abs(t._tm_q_sum - s._tm_q_sum) >
              1e-9 * greatest(abs(t._tm_q_sum), abs(s._tm_q_sum), abs(s._tm_q_min), abs(s._tm_q_max)))));

-- One run id and time for every row of the run.
CACHE TABLE tm_run AS
SELECT CAST(uuid() AS STRING) AS _tm_q_run_id, current_timestamp AS _tm_q_at;

-- Both commits carry the txn {tidemark-reconcile.spark, run_seq} (Delta's
-- idempotent writes, Delta Lake 2.3+): the log rows first, then the
-- corrections, so a job killed in between has logged what it did not yet
-- correct, and its rerun with the same run_seq skips the log commit that
-- landed and makes the corrections: never a correction without its log row.
SET spark.databricks.delta.write.txnAppId=tidemark-reconcile.spark;
SET spark.databricks.delta.write.txnVersion=${run_seq};

INSERT INTO delta.`${lake}/reconcile_log`
  (${c_run_id}, ${c_window_start}, ${c_window_end} ${k_cols},
   ${c_old_count}, ${c_new_count}, ${c_old_sum}, ${c_new_sum}, ${c_old_min}, ${c_new_min}, ${c_old_max}, ${c_new_max},
   ${c_late_rows}, ${c_corrected_at})
SELECT r._tm_q_run_id, timestamp_micros(c._tm_q_start), timestamp_micros(c._tm_q_end) ${k_cols},
       c._tm_q_old_count, c._tm_q_count, c._tm_q_old_sum, c._tm_q_sum, c._tm_q_old_min, c._tm_q_min, c._tm_q_old_max, c._tm_q_max,
       c._tm_q_late_rows, r._tm_q_at
FROM tm_corrections c CROSS JOIN tm_run r;

-- Set again: Delta may reset txnVersion after each write
-- (spark.databricks.delta.write.txnVersion.autoReset.enabled).
SET spark.databricks.delta.write.txnVersion=${run_seq};

-- A corrected row: origin batch, final, revision + 1, no watermark; a
-- window the stream never emitted (only late rows) is inserted, revision 1.
MERGE INTO delta.`${lake}/window_results` AS t
USING (
  SELECT c.*, r.*, CAST(CAST(timestamp_micros(c._tm_q_start) AS DATE) AS STRING) AS _tm_q_date
  FROM tm_corrections c CROSS JOIN tm_run r
) AS s
ON  t.${c_window_date} >= CAST(CAST(TIMESTAMP '${from_ts}' AS DATE) AS STRING)
AND t.${c_window_date} <= CAST(CAST(TIMESTAMP '${to_ts}' AS DATE) AS STRING)
AND t.${c_window_date} = s._tm_q_date
AND t.${c_window_start} = timestamp_micros(s._tm_q_start)
${k_join}
WHEN MATCHED THEN UPDATE SET
  ${c_count} = s._tm_q_count, ${c_sum} = s._tm_q_sum, ${c_min} = s._tm_q_min, ${c_max} = s._tm_q_max,
  ${c_final} = true, ${c_origin} = 'batch', ${c_revision} = t.${c_revision} + 1,
  ${c_computed_at} = s._tm_q_at, ${c_watermark} = NULL
WHEN NOT MATCHED THEN INSERT
  (${c_window_start}, ${c_window_end} ${k_cols}, ${c_count}, ${c_sum}, ${c_min}, ${c_max},
   ${c_final}, ${c_origin}, ${c_revision}, ${c_computed_at}, ${c_watermark}, ${c_window_date})
VALUES
  (timestamp_micros(s._tm_q_start), timestamp_micros(s._tm_q_end) ${k_cols_s}, s._tm_q_count, s._tm_q_sum, s._tm_q_min, s._tm_q_max,
   true, 'batch', 1, s._tm_q_at, NULL, s._tm_q_date);

RESET spark.databricks.delta.write.txnAppId;
RESET spark.databricks.delta.write.txnVersion;
