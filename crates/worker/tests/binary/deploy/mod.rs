//! The deploy kit against a real Worker: a private Prometheus ([`prometheus`]) scrapes it while
//! it runs jobs of every kind, then every query of the Grafana dashboard is evaluated through
//! Prometheus's HTTP API, every metric `docs/metrics.md` lists is checked on `/metrics` (type and
//! name), and the outbox alert of `deploy/prometheus/rules.yml` goes pending then firing while
//! the Worker cannot reach RabbitMQ (a [`FaultProxy`](crate::harness::FaultProxy) refuses it; the
//! shared broker is never touched); and [`promtool`] lints `/metrics` as Prometheus's own tool does.

mod dashboard;
mod prometheus;
mod promtool;
