//! Helpers shared by the integration tests; one module per service.

pub mod s3;
