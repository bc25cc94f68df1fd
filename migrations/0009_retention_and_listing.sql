-- Retention (issue 37): completed jobs found by their end, ended jobs by their last change, each
-- by an index of its own so a pass reads only what is due; and the leases of the passes one
-- replica at a time runs. Then the objects left by jobs that did not keep them (issue 34).
CREATE INDEX jobs_completed_at ON jobs (finished_at) WHERE status = 'completed';
CREATE INDEX jobs_ended_at ON jobs (updated_at) WHERE status IN ('failed', 'canceled', 'deleted');

CREATE TABLE pass_leases (
    -- The pass (`retention`).
    name        text        PRIMARY KEY CHECK (name <> ''),
    -- The Worker that runs it until `expires_at`.
    owner       text        NOT NULL CHECK (owner <> ''),
    expires_at  timestamptz NOT NULL
);

-- An object may be stored under the key of a job that ended without keeping one (failed, or
-- canceled, after a run had stored it): the Worker deletes it right after the commit, and, if
-- that delete failed or the Worker died first, its sweeper does, until it is gone.
ALTER TABLE jobs ADD COLUMN object_left boolean NOT NULL DEFAULT false;
CREATE INDEX jobs_object_left ON jobs (updated_at) WHERE object_left;

-- Finding jobs by their source (`GET /v1/fetcher?source=…`: the job message's
-- `metadata.source`, the system that asked for it), newest first, as migration 0008's indexes do
-- for status; a page of one source and one status reads this index and skips other statuses.
CREATE INDEX jobs_listing_source
    ON jobs (tenant_id, (metadata->>'source'), created_at DESC, job_id DESC);
