//! The deploy kit (`deploy/`) checked by the real tools, without a running Worker:
//!
//! - [`rules`]: `promtool check rules` and `promtool test rules` over `deploy/prometheus/`;
//! - [`compose`]: `deploy/compose/compose.yaml` against the compose specification's schema, and
//!   every variable it gives the Worker against the Worker's configuration;
//! - [`broker`]: the compose stack's broker, a private RabbitMQ node started with the compose
//!   file's configuration, which the Workers log in to;
//! - [`kubernetes`]: the core objects with `kubernetes-validate`, the custom resources against
//!   the fields their projects document, every variable and port against the configuration.
//! - [`spill`]: the spill volume of both (Kubernetes' emptyDir and ephemeral storage, compose's
//!   tmpfs) sized from the settings that bound what the jobs spill.
//!
//! [`tools`] installs the tools through `scripts/tools.sh` when absent (a tool that cannot be
//! installed fails the test); [`config`] reads the Worker's variables from the configuration table (`docs/configuration.md`). The
//! dashboard is checked against a real Worker and Prometheus in the `binary` test's `deploy::`.

mod broker;
mod compose;
mod config;
mod kubernetes;
mod rules;
mod spill;
mod tools;
