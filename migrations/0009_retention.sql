-- Retention (issue 37): completed jobs found by their end, ended jobs by their last change, each
-- by an index of its own so a pass reads only what is due; and the leases of the passes one
-- replica at a time runs.
CREATE INDEX jobs_completed_at ON jobs (finished_at) WHERE status = 'completed';
CREATE INDEX jobs_ended_at ON jobs (updated_at) WHERE status IN ('failed', 'canceled', 'deleted');

CREATE TABLE pass_leases (
    -- The pass (`retention`).
    name        text        PRIMARY KEY CHECK (name <> ''),
    -- The Worker that runs it until `expires_at`.
    owner       text        NOT NULL CHECK (owner <> ''),
    expires_at  timestamptz NOT NULL
);
