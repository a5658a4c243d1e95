//! Bucket names. A bucket is a table of the caller's tenant: the table folder relative to the
//! tenant's folder, with `/` written as `.` (`taxi`, `metrics.cpu` for `metrics/cpu`). Table
//! and namespace names are letters, digits, `_` and `-`, so the dot is never ambiguous.
//!
//! A suffix pins the snapshot: `taxi--v42` is version 42, `taxi--t1767225600` the version
//! current at that Unix time (seconds, UTC). Without one, a listing sees the latest commit.

use neve_core::AsOf;

use crate::error::{Error, Result};

/// Which snapshot a bucket shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    Latest,
    Version(u64),
    /// Milliseconds since the epoch.
    Time(i64),
}

impl Pin {
    pub fn as_of(self) -> AsOf {
        match self {
            Pin::Latest => AsOf::Latest,
            Pin::Version(v) => AsOf::Version(v),
            Pin::Time(t) => AsOf::Timestamp(t),
        }
    }
}

/// A parsed bucket name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketRef {
    /// The bucket name without its pin (what access keys list).
    pub base: String,
    /// The table folder relative to the tenant's folder (`metrics/cpu`).
    pub table: String,
    pub pin: Pin,
}

fn valid_segment(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Parse a bucket name; `None` if it cannot name a table (the caller answers NoSuchBucket).
pub fn parse(bucket: &str) -> Option<BucketRef> {
    let (base, pin) = match bucket.rsplit_once("--") {
        Some((base, pin)) if !base.is_empty() => match parse_pin(pin) {
            Some(pin) => (base, pin),
            None => (bucket, Pin::Latest),
        },
        _ => (bucket, Pin::Latest),
    };
    let segments: Vec<&str> = base.split('.').collect();
    if segments.len() > 3 || !segments.iter().all(|s| valid_segment(s)) {
        return None;
    }
    // As S3's own rule: a bucket starts with a letter or digit. So `/_neve/…`, the proxy's own
    // routes, can never be a bucket's keys.
    if !base.as_bytes()[0].is_ascii_alphanumeric() {
        return None;
    }
    Some(BucketRef {
        base: base.to_string(),
        table: segments.join("/"),
        pin,
    })
}

fn parse_pin(s: &str) -> Option<Pin> {
    let digits = |d: &str| !d.is_empty() && d.len() <= 19 && d.bytes().all(|b| b.is_ascii_digit());
    if let Some(v) = s.strip_prefix('v').filter(|d| digits(d)) {
        return v.parse().ok().map(Pin::Version);
    }
    if let Some(t) = s.strip_prefix('t').filter(|d| digits(d)) {
        let secs: i64 = t.parse().ok()?;
        return secs.checked_mul(1000).map(Pin::Time);
    }
    None
}

/// The bucket name of a table folder relative to its tenant's folder.
pub fn name_of(table: &str) -> String {
    table.replace('/', ".")
}

/// Check what a client may name as an object key: a key that tries to leave its bucket is
/// refused, whatever it would resolve to. `key` is the key after the one decoding of the
/// request path; `%2e` left in it is a second encoding of a dot.
pub fn check_key(key: &str) -> Result<()> {
    let refuse = |why: &str| {
        Err(Error::AccessDenied {
            reason: format!("key '{key}': {why}"),
        })
    };
    if key.contains('\\') || key.contains('\0') {
        return refuse("backslashes and NUL are not allowed");
    }
    if key.starts_with('/') {
        return refuse("an empty leading segment is not allowed");
    }
    // A key is looked up as it is among the snapshot's files, so it cannot leave the bucket;
    // still, no segment may be '.' or '..' as written or decoded up to three times (a reader or a
    // store on the way may decode it). Partition values that neve escaped stay readable:
    // `kind=%2E%2E` decodes to `kind=..`, a name, not a step up.
    for segment in key.split('/') {
        let mut text = std::borrow::Cow::Borrowed(segment.as_bytes());
        for _ in 0..4 {
            if *text == *b"." || *text == *b".." {
                return refuse("'.' and '..' segments, encoded or not, are not allowed");
            }
            let next = urlencoding::decode_binary(&text).into_owned();
            if next == *text {
                break;
            }
            text = next.into();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_pins() {
        let b = parse("taxi").unwrap();
        assert_eq!((b.table.as_str(), b.pin), ("taxi", Pin::Latest));
        let b = parse("metrics.cpu--v42").unwrap();
        assert_eq!(
            (b.base.as_str(), b.table.as_str(), b.pin),
            ("metrics.cpu", "metrics/cpu", Pin::Version(42))
        );
        assert_eq!(parse("taxi--t10").unwrap().pin, Pin::Time(10_000));
        // A table whose name merely contains `--`.
        let b = parse("a--b").unwrap();
        assert_eq!((b.table.as_str(), b.pin), ("a--b", Pin::Latest));
        assert_eq!(name_of("metrics/cpu"), "metrics.cpu");
        // `_neve` would shadow the proxy's own `/_neve/…` routes; S3 names start alphanumeric.
        assert_eq!(parse("a._b").unwrap().table, "a/_b");
        for bad in [
            "", "a..b", ".a", "a/b", "a.b.c.d", "x y", "_log..", "_neve", "-a", "_x--v3",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn keys_that_leave_the_bucket_are_refused() {
        check_key("d=2021-08/part-1.parquet").unwrap();
        check_key("d=a%2Fb/part-1.parquet").unwrap();
        // neve's own escapes of the values '..', '.' and 'a%20b'.
        check_key("kind=%2E%2E/part-1.parquet").unwrap();
        check_key("kind=%2E/part-1.parquet").unwrap();
        check_key("kind=a%2520b/part-1.parquet").unwrap();
        check_key("k=50%252Boff/part-1.parquet").unwrap();
        for bad in [
            "../_log/00000000000000000001.json",
            "d=1/../../x",
            "./x",
            "%2e%2e/_log/x",
            "%2E%2E/x",
            "%252e%252e/x",
            "/abs",
            "a\\..\\b",
            "d=1/%2E",
            "d=1/%252E%252E",
            "%25252e%25252e/x",
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
    }
}
