mod batch;
mod headers;
mod metrics;
mod routing;
mod support;
