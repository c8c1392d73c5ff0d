-- taskqueue schema, version 13: global limits per job type (issue 13, item 3).
--
-- type_limits holds one row per limited type: at most `max_running` of its jobs held (claimed or
-- running, prefetched claimed jobs included) across every worker on every host, and at most
-- `rate_per_second` claims per second, a token bucket of `burst` tokens (NULL: ceil(rate), one
-- second's claims) refilled at that rate. `tokens` and `refilled_at` are the bucket as the last
-- limited claim left it. At least one of the two limits is set. No coordinator: the claim enforces
-- them (src/queue/sql/claim-limited.ts).
--
-- The ordinary claim never takes a limited type (it skips the types of paused_types and
-- type_limits, read once per statement); the limited claim asks type_limit_room() for the room of
-- each of its types. That function first locks the types' limit rows (blocking, in type order: no
-- deadlock), then, in a statement of its own and so with a snapshot taken after the lock was
-- granted, counts each type's held jobs (through jobs_stale_idx) and refills its bucket on the
-- clock of that moment. The claim that called it writes the bucket back and commits its claims
-- before the rows are unlocked, so the next claimer's count sees them: two claimers never both see
-- room for the same slot. One plain statement could not do this: its snapshot is taken when it
-- starts, before any wait for the row lock, and its count would miss the claims committed meanwhile.
--
-- Additive: workers of version 12 still running while the schema moves know nothing of limits and
-- keep claiming limited types with their own claim statement.

CREATE TABLE :SCHEMA.type_limits (
  type            text             PRIMARY KEY,
  max_running     int              CHECK (max_running > 0),
  rate_per_second double precision CHECK (rate_per_second > 0 AND rate_per_second < 'Infinity'),
  burst           int              CHECK (burst > 0),
  tokens          double precision NOT NULL DEFAULT 0,
  refilled_at     timestamptz      NOT NULL DEFAULT now(),
  updated_at      timestamptz      NOT NULL DEFAULT now(),
  CONSTRAINT type_limit_length CHECK (length(type) BETWEEN 1 AND 200),
  CONSTRAINT type_limit_set CHECK (max_running IS NOT NULL OR rate_per_second IS NOT NULL),
  CONSTRAINT type_limit_burst_needs_rate CHECK (burst IS NULL OR rate_per_second IS NOT NULL)
);

-- The room of each limited type of `types` that is not paused, for a claim of at most `max_jobs`:
-- least(max_jobs, max_running − held jobs, floor(tokens after refill)), at least 0. Also returns
-- the refilled bucket (`tokens_now`, NULL without a rate), the time it was refilled to
-- (`checked_at`, clock_timestamp(): never before the previous claimer's, unlike now(), which is
-- the start of this transaction), the rate, and `running_room` (max_running − held jobs, NULL
-- without a max). The limit rows stay locked until the caller's transaction ends.
CREATE FUNCTION :SCHEMA.type_limit_room(types text[], max_jobs int)
  RETURNS TABLE (limit_type text, room int, tokens_now double precision, checked_at timestamptz,
                 rate double precision, running_room int)
  LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  locked text[];
  at_time timestamptz;
BEGIN
  SELECT coalesce(array_agg(s.type), '{}') INTO locked FROM (
    SELECT l.type FROM :SCHEMA.type_limits AS l
    WHERE l.type = ANY(types)
      AND NOT EXISTS (SELECT FROM :SCHEMA.paused_types AS p WHERE p.type = l.type)
    ORDER BY l.type
    FOR UPDATE OF l
  ) AS s;
  at_time := clock_timestamp();
  -- A new statement, a new snapshot: it sees every claim committed before the lock was granted.
  RETURN QUERY
    SELECT l.type,
           greatest(0, least(max_jobs, r.running_room, floor(b.tokens_now)))::int,
           b.tokens_now, at_time, l.rate_per_second, r.running_room
    FROM :SCHEMA.type_limits AS l
    CROSS JOIN LATERAL (
      SELECT CASE WHEN l.max_running IS NOT NULL
                  THEN (l.max_running - (SELECT count(*) FROM :SCHEMA.jobs AS j
                                         WHERE j.type = l.type AND j.status IN ('claimed', 'running')))::int
             END AS running_room
    ) AS r
    CROSS JOIN LATERAL (
      SELECT least(coalesce(l.burst, ceil(l.rate_per_second)),
                   l.tokens + greatest(0, extract(epoch FROM at_time - l.refilled_at)) * l.rate_per_second)
               AS tokens_now
    ) AS b
    WHERE l.type = ANY(locked)
    ORDER BY l.type;
END
$$;
