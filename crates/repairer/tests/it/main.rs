mod concurrent;
mod end_to_end;
mod manager;
mod manager_mirror;
mod metrics;
mod partial;
mod support;
mod unroutable;
