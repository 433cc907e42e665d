-- Which runs got slower after a date: of the runs of one job (names LIKE getvariable('runs')), each
-- run started at or after getvariable('since') (a date or time, UTC if no zone) whose median steady step is more than 5 % above the
-- median step of the job's runs before it.
-- DuckDB, over the views of a `trainrx export` dataset (views.sql in the dataset's folder):
--   cd DATASET && duckdb -init views.sql -cmd "SET VARIABLE since = '2026-11-20'; SET VARIABLE runs = 'nightly-%'" < slower_runs.sql
WITH per_run AS (
  SELECT s.run, r.started_at, median(s.wall_ns) AS median_step_ns, count(*) AS steps
  FROM steps s JOIN runs r USING (run)
  WHERE NOT s.warmup AND s.run LIKE getvariable('runs')
  GROUP BY s.run, r.started_at
),
before AS (
  SELECT median(median_step_ns) AS baseline_ns, count(*) AS runs
  FROM per_run WHERE started_at < CAST(getvariable('since') AS TIMESTAMPTZ)
)
SELECT p.run, p.started_at, p.steps,
       round(p.median_step_ns / 1e6, 3) AS median_step_ms,
       round(b.baseline_ns / 1e6, 3) AS baseline_ms,
       round(100 * (p.median_step_ns / b.baseline_ns - 1), 1) AS slower_pct
FROM per_run p, before b
WHERE p.started_at >= CAST(getvariable('since') AS TIMESTAMPTZ) AND p.median_step_ns > 1.05 * b.baseline_ns
ORDER BY slower_pct DESC, p.run;
