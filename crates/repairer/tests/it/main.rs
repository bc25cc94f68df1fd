mod concurrent;
mod end_to_end;
mod manager;
mod metrics;
mod partial;
mod support;
mod unroutable;
