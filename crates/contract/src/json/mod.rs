//! Go-compatible JSON writer (placeholder until written).
