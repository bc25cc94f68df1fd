//! `fetcherctl jobs list | show`: finding jobs through a Worker's control API (IoT's
//! `ListJobs`). `list` prints a table (id, status, created, and a failed job's reason) or the
//! API's JSON, one page (`--limit`, `--cursor`) or every page (`--all`).

use anyhow::bail;
use serde_json::{json, Value};

use crate::control::{self, Api, Target};

/// The most pages `--all` follows (250 jobs each), so a listing always ends.
const MAX_PAGES: usize = 4_000;

#[derive(clap::Subcommand)]
pub enum Jobs {
    /// List the tenant's jobs, newest first.
    List(List),
    /// Print one job's document (as `fetcherctl status`).
    Show(Target),
}

#[derive(clap::Args)]
pub struct List {
    /// Only jobs of this status (pending, processing, completed, failed, canceled, ...).
    #[arg(long)]
    status: Option<String>,
    /// Only jobs whose message's `metadata.source` is this (the system that asked for them).
    #[arg(long)]
    source: Option<String>,
    /// Only jobs created after this RFC 3339 time.
    #[arg(long, value_name = "TIME")]
    created_after: Option<String>,
    /// Only jobs created before this RFC 3339 time.
    #[arg(long, value_name = "TIME")]
    created_before: Option<String>,
    /// Jobs per page, 1 to 250 (the API's default: 50).
    #[arg(long)]
    limit: Option<u32>,
    /// The page after the one that printed this cursor.
    #[arg(long, conflicts_with = "all")]
    cursor: Option<String>,
    /// Every page, following the cursors.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    api: Api,
}

/// `fetcherctl jobs`.
pub async fn run(command: Jobs) -> anyhow::Result<()> {
    match command {
        Jobs::List(list) => self::list(list).await,
        Jobs::Show(target) => control::status(target).await,
    }
}

async fn list(args: List) -> anyhow::Result<()> {
    let mut cursor = args.cursor.clone();
    let mut items = Vec::new();
    let mut next = None;
    for _ in 0..MAX_PAGES {
        let path = format!("/v1/fetcher{}", query(&args, cursor.as_deref()));
        let page = control::request(&args.api, "", "GET", &path, b"").await?;
        let Some(page_items) = page["items"].as_array() else {
            bail!("the control API's answer has no items");
        };
        items.extend(page_items.iter().cloned());
        next = page["nextCursor"].as_str().map(str::to_owned);
        if !args.all || next.is_none() {
            break;
        }
        cursor = next.clone();
    }
    if args.api.json {
        println!("{}", json!({"items": items, "nextCursor": next}));
    } else {
        print!("{}", table(&items, next.as_deref()));
    }
    Ok(())
}

/// The query string of a page (`?…`, or empty).
fn query(args: &List, cursor: Option<&str>) -> String {
    let limit = args.limit.map(|n| n.to_string());
    let pairs = [
        ("status", args.status.as_deref()),
        ("source", args.source.as_deref()),
        ("createdAfter", args.created_after.as_deref()),
        ("createdBefore", args.created_before.as_deref()),
        ("limit", limit.as_deref()),
        ("cursor", cursor),
    ];
    let text: Vec<String> = pairs
        .iter()
        .filter_map(|(name, value)| value.map(|v| format!("{name}={}", encoded(v))))
        .collect();
    if text.is_empty() {
        String::new()
    } else {
        format!("?{}", text.join("&"))
    }
}

/// `value` percent-encoded but for the unreserved characters and `:`.
fn encoded(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b':' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The jobs as a table; the cursor of the next page under it, when there is one.
fn table(items: &[Value], next: Option<&str>) -> String {
    let rows: Vec<[String; 4]> = items
        .iter()
        .map(|job| {
            let text = |name: &str| job[name].as_str().unwrap_or("-").to_owned();
            [text("id"), text("status"), text("createdAt"), reason(job)]
        })
        .collect();
    let widths: Vec<usize> = (0..3)
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([["ID", "STATUS", "CREATED"][c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: [&str; 4]| {
        let text = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        format!("{}\n", text.trim_end())
    };
    let mut out = line(["ID", "STATUS", "CREATED", "REASON"]);
    for row in &rows {
        out.push_str(&line([&row[0], &row[1], &row[2], &row[3]]));
    }
    if let Some(next) = next {
        out.push_str(&format!("More: --cursor {next}\n"));
    }
    out
}

/// Why a failed job failed, as its document tells: its executions' errors, else its reason
/// code or comment. Empty for a job that did not fail.
fn reason(job: &Value) -> String {
    if job["status"] != "failed" {
        return String::new();
    }
    let errors: Vec<String> = job["executions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let error = e["statusDetails"]["error"].as_str()?;
            Some(format!(
                "{}: {error}",
                e["datasource"].as_str().unwrap_or("?")
            ))
        })
        .collect();
    if !errors.is_empty() {
        return errors.join("; ");
    }
    ["reasonCode", "comment"]
        .iter()
        .find_map(|name| job[*name].as_str().map(str::to_owned))
        .unwrap_or_else(|| "-".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_value_is_percent_encoded() {
        assert_eq!(
            encoded("2026-01-01T00:00:00+01:00"),
            "2026-01-01T00:00:00%2B01:00"
        );
        assert_eq!(encoded("a b&c=d"), "a%20b%26c%3Dd");
        assert_eq!(encoded("ZmFp_bC-x"), "ZmFp_bC-x");
    }

    #[test]
    fn a_failed_job_shows_its_executions_errors() {
        let job = json!({"status": "failed", "executions": [
            {"datasource": "ledger", "statusDetails": {"error": "timeout"}},
            {"datasource": "audit", "statusDetails": {}}]});
        assert_eq!(reason(&job), "ledger: timeout");
        assert_eq!(reason(&json!({"status": "failed", "executions": []})), "-");
        assert_eq!(reason(&json!({"status": "completed"})), "");
    }
}
