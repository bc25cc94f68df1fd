-- The job lifecycle (lifecycle §1–§3, docs/LIFECYCLE.md): cancel and delete in two phases,
-- per-job timeouts, and one execution row per datasource of a job. Additive: every row of the
-- previous schema stays as it was and means what it meant (a row of that schema is a job with
-- no cancel or delete requested, the default timeout, and no execution rows).

-- Statuses: the four of before, and the lifecycle's four.
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN (
    'pending', 'processing', 'completed', 'failed',
    'cancellation_in_progress', 'canceled', 'deletion_in_progress', 'deleted'));

ALTER TABLE jobs
    -- A cancel came before the job message: the message is acked without a run.
    ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false,
    -- The cancel stops the running statements on the source servers (`force`).
    ADD COLUMN force_canceled   boolean NOT NULL DEFAULT false,
    -- A forced delete of a job that had not ended: deleted once its cancel ends.
    ADD COLUMN delete_requested boolean NOT NULL DEFAULT false,
    -- The cancel's or delete's `comment` and the cancel's `reasonCode` (IoT's limits).
    ADD COLUMN comment          text CHECK (char_length(comment) <= 2028),
    ADD COLUMN reason_code      text CHECK (reason_code ~ '^[A-Z0-9_]{1,128}$'),
    -- When the cancel was first accepted (its latency, to `canceled`, is measured from here).
    ADD COLUMN cancel_requested_at timestamptz,
    -- The job message's `timeoutSeconds`; NULL: ENGINE_EXTRACTION_TIMEOUT_SEC.
    ADD COLUMN timeout_seconds  integer CHECK (timeout_seconds BETWEEN 1 AND 86400),
    -- When the job first entered `processing`: its timeout runs from here, takeovers included.
    ADD COLUMN first_started_at timestamptz,
    -- A deleted (or deleting) job's status before the delete, when it was deleted, and whether
    -- an object existed and was removed.
    ADD COLUMN status_before_deletion text
        CHECK (status_before_deletion IN ('completed', 'failed', 'canceled')),
    ADD COLUMN deleted_at       timestamptz,
    ADD COLUMN result_deleted   boolean;

UPDATE jobs SET first_started_at = started_at WHERE started_at IS NOT NULL;

-- A job that ended (and stays ended while deleted) has its finish time.
ALTER TABLE jobs DROP CONSTRAINT jobs_terminal_is_finished;
ALTER TABLE jobs ADD CONSTRAINT jobs_terminal_is_finished CHECK (
    (status IN ('completed', 'failed', 'canceled', 'deletion_in_progress', 'deleted'))
    = (finished_at IS NOT NULL));

-- A run being canceled is still owned: its owner (or whoever takes it over) ends the cancel.
ALTER TABLE jobs DROP CONSTRAINT jobs_processing_is_leased;
ALTER TABLE jobs ADD CONSTRAINT jobs_running_is_leased CHECK (
    status NOT IN ('processing', 'cancellation_in_progress')
    OR (owner IS NOT NULL AND lease_expires_at IS NOT NULL));

ALTER TABLE jobs ADD CONSTRAINT jobs_deletion_remembers_status CHECK (
    (status IN ('deletion_in_progress', 'deleted')) = (status_before_deletion IS NOT NULL));
ALTER TABLE jobs ADD CONSTRAINT jobs_deleted_has_time CHECK (
    (status = 'deleted') = (deleted_at IS NOT NULL));

-- The sweeper's and the takeover's scan covers runs being canceled too.
DROP INDEX jobs_processing_lease;
CREATE INDEX jobs_running_lease ON jobs (lease_expires_at)
    WHERE status IN ('processing', 'cancellation_in_progress');
-- The repair pass finds deletions to finish.
CREATE INDEX jobs_deleting ON jobs (updated_at) WHERE status = 'deletion_in_progress';

-- One execution per datasource (connection name) of a job: IoT's job executions.
CREATE TABLE job_executions (
    job_id      uuid        NOT NULL REFERENCES jobs (job_id) ON DELETE CASCADE,
    datasource  text        NOT NULL CHECK (datasource <> ''),
    status      text        NOT NULL DEFAULT 'QUEUED' CHECK (status IN (
                    'QUEUED', 'IN_PROGRESS', 'SUCCEEDED', 'FAILED', 'REJECTED', 'REMOVED',
                    'TIMED_OUT', 'CANCELED')),
    -- Rows read so far (final once ended).
    row_count   bigint      NOT NULL DEFAULT 0 CHECK (row_count >= 0),
    -- Tables the job asks of this datasource.
    tables      integer     NOT NULL DEFAULT 0 CHECK (tables >= 0),
    started_at  timestamptz,
    ended_at    timestamptz,
    -- The redacted error, when it ended with one (`statusDetails.error`).
    error       text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, datasource),
    CONSTRAINT job_executions_ended CHECK (
        (status IN ('QUEUED', 'IN_PROGRESS')) = (ended_at IS NULL)),
    CONSTRAINT job_executions_started CHECK (status = 'QUEUED' OR started_at IS NOT NULL
        OR status IN ('REJECTED', 'REMOVED', 'CANCELED'))
);
