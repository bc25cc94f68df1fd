mod batch;
mod headers;
mod metrics;
mod mqtt;
mod routing;
mod support;
