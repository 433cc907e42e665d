-- Which kernels grew: of the runs of one job (names LIKE getvariable('runs')), each kernel's time
-- per steady step of a rank (a run's kernel time over its ranks' steady steps, averaged over the
-- runs) in the runs started at or after getvariable('since') against the runs before it, the
-- largest growth first.
--   cd DATASET && duckdb -init views.sql -cmd "SET VARIABLE since = '2026-11-20'; SET VARIABLE runs = 'nightly-%'" < kernels_grew.sql
WITH steady AS (
  SELECT run, rank, step FROM steps WHERE NOT warmup AND run LIKE getvariable('runs')
),
per_step AS (
  SELECT k.run, k.name, sum(k.dur_ns) / (SELECT count(*) FROM steady s WHERE s.run = k.run) AS ns_per_step
  FROM kernels k JOIN steady s USING (run, rank, step)
  GROUP BY k.run, k.name
),
sides AS (
  SELECT p.name, r.started_at >= CAST(getvariable('since') AS TIMESTAMPTZ) AS after, avg(p.ns_per_step) AS ns_per_step
  FROM per_step p JOIN runs r USING (run)
  GROUP BY p.name, after
)
SELECT coalesce(a.name, b.name) AS kernel,
       round(coalesce(b.ns_per_step, 0) / 1e6, 3) AS before_ms_per_step,
       round(coalesce(a.ns_per_step, 0) / 1e6, 3) AS after_ms_per_step,
       round((coalesce(a.ns_per_step, 0) - coalesce(b.ns_per_step, 0)) / 1e6, 3) AS grew_ms_per_step
FROM (SELECT * FROM sides WHERE after) a FULL JOIN (SELECT * FROM sides WHERE NOT after) b USING (name)
ORDER BY grew_ms_per_step DESC, kernel
LIMIT 15;
