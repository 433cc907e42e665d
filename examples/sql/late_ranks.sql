-- Which ranks are late most often: per run and rank, at how many of the collectives matched across
-- ranks it arrived last (trainrx's straggler reading: the rank whose instance was shortest, the
-- others waiting for it), and the others' wait summed. The run's straggler comes first.
--   cd DATASET && duckdb -init views.sql < late_ranks.sql
SELECT run, rank,
       count(*) FILTER (WHERE arrived_last) AS times_last,
       count(*) AS collectives,
       round(100.0 * count(*) FILTER (WHERE arrived_last) / count(*), 1) AS last_pct,
       round(sum(others_wait_ns) / 1e6, 3) AS others_waited_ms
FROM collectives
GROUP BY run, rank
HAVING count(*) FILTER (WHERE arrived_last) > 0
ORDER BY run, times_last DESC, others_waited_ms DESC, rank;
