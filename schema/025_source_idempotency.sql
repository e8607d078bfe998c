-- A schedule's fire and a trigger's delivery are one run, whichever account the schedule or
-- trigger fires as: an edit by another account changes who a schedule fires as, and a fire retried
-- after it must find the run the first attempt made. Their Idempotency-Keys are unique per source;
-- an account's own keys (the API's) stay unique per account, and the two never meet.
--
-- A fire made twice before this release (under two accounts) keeps its first run's key; each later
-- run's key gets its run id appended, so the new index can be built and those runs stay as they are.
UPDATE runs later SET idempotency_key = later.idempotency_key || '#' || later.id
 WHERE later.source_kind IN ('schedule', 'trigger') AND later.idempotency_key IS NOT NULL
   AND EXISTS (SELECT 1 FROM runs first
                WHERE first.source_kind = later.source_kind AND first.source_id = later.source_id
                  AND first.idempotency_key = later.idempotency_key AND first.id < later.id);

CREATE UNIQUE INDEX runs_source_idempotency ON runs (source_kind, source_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL AND source_kind IN ('schedule', 'trigger');

DROP INDEX runs_idempotency;
CREATE UNIQUE INDEX runs_idempotency ON runs (account_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL AND source_kind NOT IN ('schedule', 'trigger');
