-- Finding jobs (GET /v1/fetcher, lifecycle §3): a tenant's jobs newest first, optionally of one
-- status, read a page at a time by keyset (created_at, job_id) so a page costs the same however
-- many jobs the table holds. Single-tenant jobs (tenant_id NULL) are found by the same indexes.
CREATE INDEX jobs_listing ON jobs (tenant_id, created_at DESC, job_id DESC);
CREATE INDEX jobs_listing_status ON jobs (tenant_id, status, created_at DESC, job_id DESC);
