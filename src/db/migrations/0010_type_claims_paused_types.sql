-- taskqueue schema, version 10: claims led by type, and paused types (issue 14, items 8 and 10).
--
-- jobs_claim_idx is rebuilt led by `type`: (type, priority DESC, run_at, id) over the ordinary
-- pending jobs. A claim walks it once per type it asks for (a LATERAL per type, see
-- src/queue/sql/claim.ts), so it never reads the pending jobs of types it does not handle: up to
-- version 9 a worker of type `a` filtered out every pending job of other types ahead of its own
-- in claim order (1,000,000 pending `b` jobs: a 133 ms scan per claim). Claim order is unchanged:
-- priority DESC, run_at, id across the types asked for. The per-type counts of the metrics, the
-- overview and the pending caps read the same index, now in type order. It stays one index, so an
-- enqueue costs what it did.
--
-- paused_types holds one row per paused type (`paused_at`: when it was paused). Claims skip the
-- types it lists, in the claim statement itself, so every worker on every host stops claiming a
-- paused type at its next claim; jobs already held run to their end. Pausing a type that has no
-- jobs is allowed (it may get some later). The state is a row: it survives restarts.
--
-- The index is rebuilt in the migration's transaction (CREATE INDEX CONCURRENTLY cannot run in
-- one): the upgrade blocks writes to jobs while it reads the table once. Workers of version 9 still
-- running while the schema moves keep claiming with their own statement (slower: the new index
-- does not give their order without a sort) and ignore pauses.

DROP INDEX :SCHEMA.jobs_claim_idx;
CREATE INDEX jobs_claim_idx ON :SCHEMA.jobs (type, priority DESC, run_at, id) WHERE status = 'pending' AND NOT run_alone;

CREATE TABLE :SCHEMA.paused_types (
  type       text        PRIMARY KEY,
  paused_at  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT paused_type_length CHECK (length(type) BETWEEN 1 AND 200)
);
