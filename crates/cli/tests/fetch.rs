//! `fetcherctl fetch` against the real S3 server (s3s-fs): a result stored as the Worker stores
//! it is opened, checked against its HMAC and printed byte for byte.

mod support;

use std::process::Output;

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use storage::{object_key, ObjectStore, StaticCredentials, StorageConfig};
use uuid::Uuid;

/// `TEST_S3_ENDPOINT`, `TEST_S3_ACCESS_KEY`, `TEST_S3_SECRET_KEY`, defaulting to the server of
/// `scripts/services.sh s3`.
fn s3_env() -> (String, String, String) {
    let var =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    (
        var("TEST_S3_ENDPOINT", "http://127.0.0.1:9000"),
        var("TEST_S3_ACCESS_KEY", "fetcher"),
        var("TEST_S3_SECRET_KEY", "fetcher-secret"),
    )
}

/// A fresh bucket, removed by [`TestBucket::remove`].
struct TestBucket {
    name: String,
    prefix: String,
    store: ObjectStore,
}

impl TestBucket {
    async fn create(prefix: &str) -> TestBucket {
        let (endpoint, access_key, secret_key) = s3_env();
        let name = format!("fetcherctl-test-{}", Uuid::new_v4().simple());
        let store = ObjectStore::new(StorageConfig {
            endpoint: Some(endpoint),
            credentials: Some(StaticCredentials::new(access_key, secret_key)),
            use_path_style: true,
            key_prefix: prefix.to_owned(),
            ..StorageConfig::new(&name)
        })
        .await
        .expect("store settings");
        store
            .create_bucket_if_missing()
            .await
            .unwrap_or_else(|error| {
                panic!(
                    "cannot create test bucket {name}: {error}. These tests need the S3 server of \
                 `bash scripts/services.sh s3` (or TEST_S3_ENDPOINT)"
                )
            });
        TestBucket {
            name,
            prefix: prefix.to_owned(),
            store,
        }
    }

    /// `fetcherctl fetch` configured like the Worker for this bucket.
    fn fetch(&self, args: &[&str]) -> Output {
        self.fetch_with(support::MASTER, args)
    }

    /// The same, with another master key.
    fn fetch_with(&self, master: &str, args: &[&str]) -> Output {
        self.fetch_command(master, args)
            .output()
            .expect("run fetcherctl fetch")
    }

    /// `fetcherctl fetch args`, not started.
    fn fetch_command(&self, master: &str, args: &[&str]) -> std::process::Command {
        let (endpoint, access_key, secret_key) = s3_env();
        let mut command = support::fetcherctl();
        command
            .env("APP_ENC_KEY", master)
            .env("OBJECT_STORAGE_ENDPOINT", endpoint)
            .env("OBJECT_STORAGE_BUCKET", &self.name)
            .env("OBJECT_STORAGE_KEY_PREFIX", &self.prefix)
            .env("OBJECT_STORAGE_ACCESS_KEY_ID", access_key)
            .env("OBJECT_STORAGE_SECRET_KEY", secret_key)
            .env("OBJECT_STORAGE_USE_PATH_STYLE", "true")
            .arg("fetch")
            .args(args);
        command
    }

    /// Deletes `keys` and the bucket.
    async fn remove(self, keys: &[&str]) {
        for key in keys {
            self.store.delete(key).await.expect("delete test object");
        }
        let (endpoint, access_key, secret_key) = s3_env();
        let client = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(Region::new("us-east-1"))
                .endpoint_url(endpoint)
                .force_path_style(true)
                .credentials_provider(Credentials::new(access_key, secret_key, None, None, "test"))
                .build(),
        );
        client
            .delete_bucket()
            .bucket(&self.name)
            .send()
            .await
            .unwrap_or_else(|error| panic!("cannot remove test bucket {}: {error}", self.name));
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A result JSON as the Worker writes it (indented, no trailing newline, escaped `<`).
const PLAINTEXT: &str = "{\n  \"ledger\": {\n    \"accounts\": [\n      {\n        \"id\": 1,\n        \"name\": \"caf\u{e9} \\u003cb\\u003e\"\n      }\n    ]\n  }\n}";

#[tokio::test(flavor = "multi_thread")]
async fn a_stored_result_is_opened_verified_and_printed_exactly() {
    let bucket = TestBucket::create("results/").await;
    let keys = support::keys();
    let job = Uuid::new_v4();
    let key = object_key(&bucket.prefix, Some("acme"), job).expect("key");
    assert_eq!(key.full, format!("results/acme/external-data/{job}.json"));
    bucket
        .store
        .put_sealed(
            &key.full,
            keys.storage().seal_raw(PLAINTEXT.as_bytes().to_vec()),
        )
        .await
        .expect("store the sealed result");
    let hmac = keys.external_hmac().sign_hex(PLAINTEXT.as_bytes());

    // By job and tenant (the key computed as in contract §7), and by the event's path.
    let job_text = job.to_string();
    for args in [
        vec![
            "--job",
            job_text.as_str(),
            "--tenant",
            "acme",
            "--hmac",
            hmac.as_str(),
        ],
        vec!["--path", key.path.as_str(), "--hmac", hmac.as_str()],
    ] {
        let output = tokio::task::block_in_place(|| bucket.fetch(&args));
        assert!(output.status.success(), "{args:?}: {output:?}");
        assert_eq!(output.stdout, PLAINTEXT.as_bytes(), "{args:?}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains("HMAC verified"), "{stderr}");
        assert!(!stderr.contains("fetcher-secret"), "{stderr}");
    }

    // Into a file, owner-only.
    let out = std::env::temp_dir().join(format!("fetcherctl-test-{}.json", Uuid::new_v4()));
    let out_text = out.to_str().expect("utf-8 path").to_owned();
    let output = tokio::task::block_in_place(|| {
        bucket.fetch(&["--job", &job_text, "--tenant", "acme", "--out", &out_text])
    });
    assert!(output.status.success(), "{output:?}");
    assert!(output.stdout.is_empty());
    assert!(text(&output.stderr).contains("HMAC not checked"));
    assert_eq!(std::fs::read(&out).expect("written"), PLAINTEXT.as_bytes());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&out)
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    std::fs::remove_file(&out).expect("remove output");

    // A wrong HMAC: failure, and not a byte of the result.
    let wrong = keys.external_hmac().sign_hex(b"another result");
    let output = tokio::task::block_in_place(|| {
        bucket.fetch(&["--job", &job_text, "--tenant", "acme", "--hmac", &wrong])
    });
    assert!(!output.status.success(), "{output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    assert!(text(&output.stderr).contains("HMAC mismatch"), "{output:?}");

    // Without the tenant the key differs: the object does not exist there.
    let output =
        tokio::task::block_in_place(|| bucket.fetch(&["--job", &job_text, "--hmac", &hmac]));
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("does not exist"),
        "{output:?}"
    );

    bucket.remove(&[&key.full]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_different_master_key_cannot_open_the_result() {
    let bucket = TestBucket::create("").await;
    let job = Uuid::new_v4();
    let key = object_key("", None, job).expect("key");
    bucket
        .store
        .put_sealed(
            &key.full,
            support::keys().storage().seal_raw(b"{}".to_vec()),
        )
        .await
        .expect("store");

    let job_text = job.to_string();
    let output = tokio::task::block_in_place(|| bucket.fetch(&["--job", &job_text]));
    assert!(
        output.status.success(),
        "the right key opens it: {output:?}"
    );
    assert_eq!(output.stdout, b"{}");

    let other_master = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY=";
    let output =
        tokio::task::block_in_place(|| bucket.fetch_with(other_master, &["--job", &job_text]));
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("Failed to open object"), "{stderr}");
    assert!(!stderr.contains(other_master), "{stderr}");

    bucket.remove(&[&key.full]).await;
}

/// The permission bits of `path` (not following a symlink).
#[cfg(unix)]
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::symlink_metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

/// A bucket holding one sealed result, and a fresh directory for `--out` files.
struct OutFixture {
    bucket: TestBucket,
    key: String,
    job: String,
    dir: std::path::PathBuf,
}

impl OutFixture {
    async fn create() -> OutFixture {
        let bucket = TestBucket::create("").await;
        let job = Uuid::new_v4();
        let key = object_key("", None, job).expect("key").full;
        let sealed = support::keys()
            .storage()
            .seal_raw(PLAINTEXT.as_bytes().to_vec());
        bucket.store.put_sealed(&key, sealed).await.expect("store");
        let dir = std::env::temp_dir().join(support::unique("out"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        OutFixture {
            bucket,
            key,
            job: job.to_string(),
            dir,
        }
    }

    fn fetch_to(&self, out: &std::path::Path) -> Output {
        let out = out.to_str().expect("utf-8 path");
        tokio::task::block_in_place(|| self.bucket.fetch(&["--job", &self.job, "--out", out]))
    }

    /// The names in the directory, sorted: what a fetch left behind.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .expect("list")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }

    async fn remove(self) {
        std::fs::remove_dir_all(&self.dir).expect("remove temp dir");
        self.bucket.remove(&[&self.key]).await;
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn out_refuses_a_symlink_and_leaves_its_target_untouched() {
    use std::os::unix::fs::PermissionsExt as _;
    let fixture = OutFixture::create().await;
    let elsewhere = fixture.dir.join("elsewhere.txt");
    std::fs::write(&elsewhere, "precious").expect("write target");
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let link = fixture.dir.join("link.json");
    std::os::unix::fs::symlink(&elsewhere, &link).expect("symlink");

    let output = fixture.fetch_to(&link);
    assert!(!output.status.success(), "{output:?}");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("is a symbolic link"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&elsewhere).expect("read"),
        "precious"
    );
    assert_eq!(mode(&elsewhere), 0o644, "the target keeps its mode");
    let link_type = std::fs::symlink_metadata(&link).expect("link").file_type();
    assert!(link_type.is_symlink(), "the link is left as it was");
    assert_eq!(fixture.names(), ["elsewhere.txt", "link.json"]);
    fixture.remove().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn out_replaces_an_existing_readable_file_with_an_owner_only_one() {
    use std::os::unix::fs::PermissionsExt as _;
    let fixture = OutFixture::create().await;
    let existing = fixture.dir.join("existing.json");
    std::fs::write(&existing, "an older result, longer than nothing").expect("write");
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644)).expect("chmod");

    let output = fixture.fetch_to(&existing);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        std::fs::read(&existing).expect("read"),
        PLAINTEXT.as_bytes()
    );
    assert_eq!(mode(&existing), 0o600);
    assert_eq!(
        fixture.names(),
        ["existing.json"],
        "no temporary file is left"
    );
    fixture.remove().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn out_creates_a_new_file_owner_only() {
    let fixture = OutFixture::create().await;
    let new = fixture.dir.join("new.json");

    let output = fixture.fetch_to(&new);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(std::fs::read(&new).expect("read"), PLAINTEXT.as_bytes());
    assert_eq!(mode(&new), 0o600);
    assert_eq!(fixture.names(), ["new.json"], "no temporary file is left");
    fixture.remove().await;
}

#[test]
fn missing_settings_are_named_and_secrets_never_printed() {
    let output = support::fetcherctl()
        .env("APP_ENC_KEY", support::MASTER)
        .env("OBJECT_STORAGE_SECRET_KEY", "s3-secret-sentinel")
        .args(["fetch", "--job", &Uuid::new_v4().to_string()])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("OBJECT_STORAGE_BUCKET is required"),
        "{stderr}"
    );
    assert!(stderr.contains("must be set together"), "{stderr}");
    assert!(!stderr.contains("s3-secret-sentinel"), "{stderr}");

    // Without the master key nothing can be opened: said before any download.
    let output = support::fetcherctl()
        .args(["fetch", "--path", "external-data/x.json"])
        .output()
        .expect("run");
    assert!(!output.status.success());
    assert!(text(&output.stderr).contains("APP_ENC_KEY is not set"));
}

/// A JSON-ish result of `rows` rows, about 100 bytes each, as the Worker writes them.
fn rows_json(rows: usize) -> Vec<u8> {
    let mut json = b"{\n  \"pg\": {\n    \"payments\": [".to_vec();
    for row in 0..rows {
        if row > 0 {
            json.push(b',');
        }
        json.extend_from_slice(row_json(row).as_bytes());
    }
    json.extend_from_slice(b"\n    ]\n  }\n}");
    json
}

fn row_json(row: usize) -> String {
    format!(
        "\n      {{\n        \"amount\": \"{}.{:02}\",\n        \"id\": {row},\n        \"memo\": \"caf\u{e9} \\u003c{}\\u003e\"\n      }}",
        row * 7 % 100_000,
        row % 100,
        row % 997
    )
}

/// A bucket holding `plaintext` sealed as the Worker stores it (with `flip`, one byte of the
/// sealed blob's ciphertext XORed), and a fresh directory for `--out` files.
async fn fixture_with(plaintext: &[u8], flip: Option<usize>) -> OutFixture {
    let bucket = TestBucket::create("").await;
    let job = Uuid::new_v4();
    let key = object_key("", None, job).expect("key").full;
    let mut sealed = support::keys().storage().seal_raw(plaintext.to_vec());
    if let Some(at) = flip {
        sealed[crypto::NONCE_LEN + at] ^= 0x01;
    }
    bucket.store.put_sealed(&key, sealed).await.expect("store");
    let dir = std::env::temp_dir().join(support::unique("out"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    OutFixture {
        bucket,
        key,
        job: job.to_string(),
        dir,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_of_many_chunks_round_trips_byte_for_byte() {
    // About 6 MiB: some 130 of OpenStream's 48 KiB steps, and many HTTP body chunks.
    let plaintext = rows_json(60_000);
    assert!(plaintext.len() > 6 << 20, "{}", plaintext.len());
    let hmac = support::keys().external_hmac().sign_hex(&plaintext);
    let fixture = fixture_with(&plaintext, None).await;

    let out = fixture.dir.join("result.json");
    let out_text = out.to_str().expect("utf-8 path");
    let output = tokio::task::block_in_place(|| {
        fixture
            .bucket
            .fetch(&["--job", &fixture.job, "--hmac", &hmac, "--out", out_text])
    });
    assert!(output.status.success(), "{output:?}");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("HMAC verified"), "{stderr}");
    // Standard error is a pipe here: no progress bar, no control codes.
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(
        std::fs::read(&out).expect("read") == plaintext,
        "the file differs from the result"
    );
    assert_eq!(
        fixture.names(),
        ["result.json"],
        "no temporary file is left"
    );

    // To standard output: the same bytes, after the checks.
    let output = tokio::task::block_in_place(|| {
        fixture
            .bucket
            .fetch(&["--job", &fixture.job, "--hmac", &hmac])
    });
    assert!(output.status.success(), "{output:?}");
    assert!(output.stdout == plaintext, "standard output differs");
    fixture.remove().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tampered_object_fails_the_tag_check_and_leaves_nothing() {
    let plaintext = rows_json(30_000);
    let hmac = support::keys().external_hmac().sign_hex(&plaintext);
    // A byte in the middle: the plaintext before it has already been written when it arrives.
    let fixture = fixture_with(&plaintext, Some(plaintext.len() / 2)).await;

    let out = fixture.dir.join("result.json");
    let output = fixture.fetch_to(&out);
    assert!(!output.status.success(), "{output:?}");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("GCM tag check failed"), "{stderr}");
    assert!(!stderr.contains("HMAC"), "the tag fails first: {stderr}");
    assert!(fixture.names().is_empty(), "left: {:?}", fixture.names());

    let output = tokio::task::block_in_place(|| {
        fixture
            .bucket
            .fetch(&["--job", &fixture.job, "--hmac", &hmac])
    });
    assert!(!output.status.success(), "{output:?}");
    assert!(text(&output.stderr).contains("GCM tag check failed"));
    assert!(output.stdout.is_empty(), "unverified plaintext printed");
    fixture.remove().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_hmac_mismatch_fails_and_leaves_nothing() {
    let plaintext = rows_json(30_000);
    let wrong = support::keys().external_hmac().sign_hex(b"another result");
    let fixture = fixture_with(&plaintext, None).await;
    // An earlier result at the output path stays as it was.
    let out = fixture.dir.join("result.json");
    std::fs::write(&out, "an older result").expect("write");

    let out_text = out.to_str().expect("utf-8 path");
    let output = tokio::task::block_in_place(|| {
        fixture
            .bucket
            .fetch(&["--job", &fixture.job, "--hmac", &wrong, "--out", out_text])
    });
    assert!(!output.status.success(), "{output:?}");
    assert!(text(&output.stderr).contains("HMAC mismatch"), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(&out).expect("read"),
        "an older result"
    );
    assert_eq!(
        fixture.names(),
        ["result.json"],
        "no temporary file is left"
    );
    fixture.remove().await;
}

/// Benchmark for BENCHMARKS.md (`make bench`), not a test: `fetcherctl fetch --out` of a 1 GiB
/// result, sealed with `SealStream` into the real S3 server, must peak under 64 MiB resident.
/// Prints the peak RSS (VmHWM from /proc, sampled every 10 ms until the process exits: it is a
/// high-water mark, so the last sample holds every earlier peak), the CPU seconds (utime + stime
/// of the exited process) and the wall time. Needs about 2.5 GB of free disk for the stored
/// object and the output, both removed after.
#[ignore = "benchmark: run by make bench"]
#[tokio::test(flavor = "multi_thread")]
async fn bench_fetch_of_a_1_gib_result_in_constant_memory() {
    const TARGET: u64 = 1 << 30;
    const LIMIT_KIB: u64 = 64 * 1024;
    let bucket = TestBucket::create("").await;
    let key = object_key("", None, Uuid::new_v4()).expect("key");
    let keys = support::keys();

    // The result, sealed and uploaded as it is generated, about 1 MiB at a time.
    let started = std::time::Instant::now();
    let mut upload = bucket.store.upload(&key.full);
    let mut seal = crypto::SealStream::new(keys.storage());
    let mut hmac = keys.external_hmac().start();
    let (mut plaintext, mut text) = (b"{\n  \"pg\": {\n    \"payments\": [".to_vec(), Vec::new());
    let (mut len, mut row) = (0u64, 0usize);
    while len + (plaintext.len() as u64) < TARGET {
        while plaintext.len() < 1 << 20 {
            if row > 0 {
                plaintext.push(b',');
            }
            plaintext.extend_from_slice(row_json(row).as_bytes());
            row += 1;
        }
        len += plaintext.len() as u64;
        hmac.update(&plaintext);
        seal.update(&plaintext, &mut text).expect("seal");
        upload.write(&text).await.expect("upload");
        plaintext.clear();
        text.clear();
    }
    plaintext.extend_from_slice(b"\n    ]\n  }\n}");
    len += plaintext.len() as u64;
    hmac.update(&plaintext);
    seal.update(&plaintext, &mut text).expect("seal");
    seal.finish(&mut text);
    upload.write(&text).await.expect("upload");
    let stored = upload.finish(async { Ok(()) }).await.expect("publish");
    let hmac = hmac.finish_hex();
    eprintln!(
        "fetch bench: {len} plaintext bytes ({row} rows), {stored} stored bytes, sealed and \
         uploaded in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let dir = std::env::temp_dir().join(support::unique("bench"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let out = dir.join("result.json");
    let out_text = out.to_str().expect("utf-8 path");
    let measured = tokio::task::block_in_place(|| {
        let mut command = bucket.fetch_command(
            support::MASTER,
            &["--path", &key.path, "--hmac", &hmac, "--out", out_text],
        );
        measure(&mut command)
    });
    let output_len = std::fs::metadata(&out).map(|meta| meta.len());
    std::fs::remove_dir_all(&dir).expect("remove the output");
    bucket.remove(&[&key.full]).await;

    assert!(measured.success, "fetch failed: {}", measured.stderr);
    assert!(
        measured.stderr.contains("HMAC verified"),
        "{}",
        measured.stderr
    );
    assert_eq!(output_len.expect("output written"), len);
    eprintln!(
        "fetch bench: fetcherctl fetch --out of {:.2} GiB: peak RSS (VmHWM) {:.1} MiB, {:.2} \
         CPU-seconds (utime {:.2} + stime {:.2}), {:.2} s wall, {:.0} MB/s of plaintext",
        len as f64 / f64::from(1u32 << 30),
        measured.peak_kib as f64 / 1024.0,
        measured.utime + measured.stime,
        measured.utime,
        measured.stime,
        measured.wall,
        len as f64 / 1e6 / measured.wall
    );
    assert!(
        measured.peak_kib < LIMIT_KIB,
        "peak RSS {} KiB is not under {LIMIT_KIB} KiB",
        measured.peak_kib
    );
}

/// A finished process, measured from /proc.
struct Measured {
    success: bool,
    stderr: String,
    peak_kib: u64,
    utime: f64,
    stime: f64,
    wall: f64,
}

/// Runs `command`, sampling its VmHWM until it exits, and reads its CPU times from the exited
/// (not yet reaped) process's /proc/<pid>/stat.
fn measure(command: &mut std::process::Command) -> Measured {
    use std::io::Read as _;
    let ticks: f64 = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0);
    let started = std::time::Instant::now();
    let mut child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start fetcherctl");
    let pid = child.id();
    let mut peak_kib = 0;
    let (utime, stime, wall) = loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        // The fields after the command name: state is the first, utime the 12th, stime the 13th.
        let fields: Vec<&str> = stat[stat.rfind(')').expect("comm") + 2..]
            .split_whitespace()
            .collect();
        let cpu = |at: usize| fields[at].parse::<f64>().expect("ticks") / ticks;
        if fields[0] == "Z" {
            break (cpu(11), cpu(12), started.elapsed().as_secs_f64());
        }
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            let hwm = status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok());
            peak_kib = peak_kib.max(hwm.unwrap_or(0));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut stderr)
        .expect("stderr");
    let status = child.wait().expect("wait");
    Measured {
        success: status.success(),
        stderr,
        peak_kib,
        utime,
        stime,
        wall,
    }
}
