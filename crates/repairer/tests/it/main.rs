mod concurrent;
mod end_to_end;
mod metrics;
mod partial;
mod support;
mod unroutable;
