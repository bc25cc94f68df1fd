mod support;
use support::s3::with_bucket;
fn hwm() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmHWM"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}
fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}
#[tokio::test]
async fn mem() {
    with_bucket(
        |_| {},
        |bucket| async move {
            let plain: Vec<u8> = (0..128usize * 1024 * 1024)
                .map(|i| (i * 31 + i / 7) as u8)
                .collect();
            let sealed = crypto::CipherKey::from_bytes([7; 32]).seal_raw(plain);
            std::fs::write("/proc/self/clear_refs", "5").unwrap();
            let before = rss();
            let n = bucket.store.put_sealed("big.json", sealed).await.unwrap();
            eprintln!(
                "MEM stored {} MiB; rss before {before} MiB; peak during put {} MiB (delta {})",
                n >> 20,
                hwm(),
                hwm() - before
            );
        },
    )
    .await;
}
