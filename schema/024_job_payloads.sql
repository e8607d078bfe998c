-- What a job the API asks of a worker through Temporal (activities/jobs.ts) reads and answers when
-- it is too large for a Temporal payload: an inventory being saved or previewed (up to 26 MiB), the
-- hosts a preview reaches, a project's file. Written and removed by the job's caller; anything a
-- lost server left behind is removed by the upkeep after an hour.
CREATE TABLE job_payloads (
  id         text PRIMARY KEY,
  body       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_payloads_created ON job_payloads (created_at);
