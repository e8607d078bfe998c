-- The executor fleet (GET /v1/workers): one row per running worker process, the server's own pool
-- worker included. A worker inserts its row at start, renews it every third of its lease
-- (--lease-seconds) and deletes it on a clean stop. A row not renewed for three periods is shown
-- lost; one lost for a day is pruned by the next worker that renews. Freshness is judged on the
-- database's clock, so servers whose clocks disagree still agree on it.
CREATE TABLE workers (
  id            text PRIMARY KEY,
  -- The Cairn queue it serves: "" for the default pool, else a named queue.
  queue         text NOT NULL,
  -- The Temporal task queue it polls for runs (workers/names.ts executionTaskQueue).
  task_queue    text NOT NULL,
  host          text NOT NULL,
  pid           integer NOT NULL,
  -- Seconds between renewals: a third of the worker's --lease-seconds.
  renew_seconds double precision NOT NULL CHECK (renew_seconds > 0),
  started_at    timestamptz NOT NULL DEFAULT now(),
  renewed_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workers_renewed_at ON workers (renewed_at);
