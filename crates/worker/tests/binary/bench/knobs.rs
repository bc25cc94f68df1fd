//! The benchmarks' knobs: numbers and comma-separated lists from the environment, a default
//! otherwise; a value that is not a number stops the benchmark saying which.

/// `name` as comma-separated numbers, or `default`'s.
pub fn list(name: &str, default: &str) -> Vec<u64> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}: {n:?} is not a number"))
        })
        .collect()
}

/// `name` as one number, or `default`.
pub fn number(name: &str, default: u64) -> usize {
    list(name, &default.to_string())[0] as usize
}
