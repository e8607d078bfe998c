-- The credential ids a run is given (spec part A 2.9), in order, on the run itself: every read of a
-- run, a page of runs and the events that carry a run shows them with no further query. Written
-- once, with the run. No foreign key, as before: a finished run keeps naming a credential deleted
-- since. A credential's delete finds the unended runs naming it through runs_unfinished.
ALTER TABLE runs ADD COLUMN credentials text[] NOT NULL DEFAULT '{}';

UPDATE runs r SET credentials = given.ids
FROM (SELECT run_id, array_agg(credential_id ORDER BY position) AS ids FROM run_credentials GROUP BY run_id) given
WHERE r.id = given.run_id;

DROP TABLE run_credentials;
