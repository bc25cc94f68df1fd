-- Job state (contract §5) and the transactional outbox of terminal job events (contract §8).
-- A job's terminal status, its result or redacted error, and the outbox row of its terminal event
-- are written in one transaction; the outbox row's body is frozen there and every (re)publish
-- sends those bytes.

CREATE TABLE jobs (
    job_id            uuid        PRIMARY KEY,
    -- X-Tenant-ID of the job message; NULL: single-tenant.
    tenant_id         text,
    status            text        NOT NULL DEFAULT 'pending'
                      CHECK (status IN ('pending', 'processing', 'completed', 'failed')),
    -- X-Request-Id of the job message, for log correlation and the event's X-Request-Id.
    request_id        text,
    -- The job message's metadata, carried through to its events.
    metadata          jsonb       NOT NULL DEFAULT '{}'::jsonb
                      CHECK (jsonb_typeof(metadata) = 'object'),
    -- What the job asks for ({"mappedFields": ..., "filters": ...}); NULL when the message could
    -- not be parsed (the job is then recorded failed without ever running).
    spec              jsonb,
    -- Set when completed: the object key without OBJECT_STORAGE_KEY_PREFIX, the lowercase hex
    -- HMAC of the plaintext, its length and the rows over all tables.
    result_path       text,
    result_hmac       text,
    result_size_bytes bigint      CHECK (result_size_bytes >= 0),
    result_row_count  bigint      CHECK (result_row_count >= 0),
    -- Set when failed: the redacted error (contract §8), as the failed event reports it.
    error_message     text,
    -- How many times the job was claimed for extraction.
    attempts          integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- The claim: who runs (or last ran) the job, and until when its lease holds. A processing job
    -- whose lease expired may be taken over by another owner.
    owner             text,
    lease_expires_at  timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    -- When the latest attempt started.
    started_at        timestamptz,
    finished_at       timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT jobs_processing_is_leased
        CHECK (status <> 'processing' OR (owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT jobs_terminal_is_finished
        CHECK ((status IN ('completed', 'failed')) = (finished_at IS NOT NULL)),
    CONSTRAINT jobs_completed_has_result
        CHECK (status <> 'completed' OR (result_path IS NOT NULL AND result_hmac IS NOT NULL))
);

-- Finding processing jobs whose worker was lost (lease long expired).
CREATE INDEX jobs_processing_lease ON jobs (lease_expires_at) WHERE status = 'processing';

CREATE TABLE outbox (
    id              bigserial   PRIMARY KEY,
    -- fetcher.job.<status>.<jobId>: at most one event per job and terminal status.
    ce_id           text        NOT NULL UNIQUE,
    -- No cascade: a job cannot be deleted while it still has an event row.
    job_id          uuid        NOT NULL REFERENCES jobs (job_id),
    -- The compact JSON body, byte for byte as every publish sends it.
    body            bytea       NOT NULL,
    -- The CloudEvents attributes (serde form of contract::event::CloudEventAttributes).
    attributes      jsonb       NOT NULL CHECK (attributes ->> 'id' = ce_id),
    request_id      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- NULL until the broker confirmed a publish.
    published_at    timestamptz,
    -- Publish attempts: every lease taken on the row (the immediate publish included).
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- Not retried before this time (backoff after a failed publish).
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- The publisher that holds the row, and until when; a row with an expired lease is free.
    leased_by       text,
    lease_until     timestamptz,
    -- Redacted error of the latest failed publish.
    last_error      text
);

-- The repairer's scan: unpublished rows, due first.
CREATE INDEX outbox_unpublished ON outbox (next_attempt_at, id) WHERE published_at IS NULL;
-- Retention: published rows by age.
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;
-- A job's events (redelivery of a terminal job) and the foreign key's checks.
CREATE INDEX outbox_job ON outbox (job_id);
