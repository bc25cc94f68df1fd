mod claims;
mod errors;
mod relay;
mod retention;
mod support;
mod terminal;
