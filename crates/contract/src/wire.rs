//! Names on the wire that the Worker, its publisher and `fetcherctl` must spell alike: message
//! headers beyond the signature's own (those are in [`crate::envelope`]) and the work queue's
//! conventional name.

/// `X-Tenant-ID`: the job's tenant (signed as part of the route, contract §3).
pub const TENANT_HEADER: &str = "X-Tenant-ID";
/// `X-Request-Id`: correlation for the Worker's logs and the job's events.
pub const REQUEST_ID_HEADER: &str = "X-Request-Id";
/// `jobId`: lets a message whose body cannot be parsed still fail its job (contract §4).
pub const JOB_ID_HEADER: &str = "jobId";
/// The work queue's conventional name (contract §4; `RABBITMQ_FETCHER_WORK_QUEUE`'s default).
pub const DEFAULT_WORK_QUEUE: &str = "fetcher.extract-external-data.queue";
