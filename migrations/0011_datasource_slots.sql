-- Per-datasource concurrency caps (`DATASOURCE_<NAME>_MAX_CONCURRENT`) across every replica: a
-- capped datasource has N slots, and a job's read of it first takes one. A slot is held under a
-- lease renewed while the read runs, deleted when it ends, and free again once its lease lapsed
-- (its Worker died). No row: a free slot.
CREATE TABLE datasource_slots (
    -- The connection name jobs use.
    datasource  text        NOT NULL CHECK (datasource <> ''),
    -- 0 to N-1.
    slot        integer     NOT NULL CHECK (slot >= 0),
    -- The run that holds it (its claim's owner) and its job.
    owner       text        NOT NULL CHECK (owner <> ''),
    job_id      uuid        NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (datasource, slot)
);
