-- The SHA-256 of the job message a job was first accepted from (its body, as signed). A later
-- delivery of the job whose signature is older than the freshness window (a broker redelivery,
-- a retry after an unreachable dependency, a Worker that died) is taken only when its body has
-- this digest: freshness guards a job's first acceptance, the digest every later one.
-- NULL: the job was recorded without running (an unusable message), or before this column.
ALTER TABLE jobs
    ADD COLUMN message_sha256 bytea
    CHECK (message_sha256 IS NULL OR octet_length(message_sha256) = 32);
