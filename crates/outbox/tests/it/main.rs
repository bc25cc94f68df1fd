mod claims;
mod control;
mod errors;
mod executions;
mod relay;
mod retention;
mod support;
mod terminal;
