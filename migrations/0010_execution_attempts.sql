-- Retries of a datasource within a run (`JOB_RETRY_ATTEMPTS`): how many attempts its execution
-- took, and the redacted error of the last attempt that failed and was retried, shown in its
-- `statusDetails` (`attempts`, `lastError`) once it was tried more than once. 0: not started.
ALTER TABLE job_executions
    ADD COLUMN attempts   integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    ADD COLUMN last_error text;
