//! `fetcher-worker`: the binary operators deploy.

fn main() -> anyhow::Result<()> {
    anyhow::bail!("fetcher-worker is being assembled; see the README")
}
