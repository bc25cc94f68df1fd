mod claims;
mod control;
mod errors;
mod relay;
mod retention;
mod support;
mod terminal;
