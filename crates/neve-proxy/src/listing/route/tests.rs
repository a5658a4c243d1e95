use std::collections::BTreeMap;

use neve_core::log::AddFile;
use proptest::prelude::*;

use super::*;
use crate::listing::{self, Resume, DATA};

fn files(entries: &[(String, u64, i64)]) -> BTreeMap<String, Arc<AddFile>> {
    entries
        .iter()
        .map(|(k, size, modified)| {
            (
                format!("{DATA}{k}"),
                Arc::new(AddFile {
                    path: format!("{DATA}{k}"),
                    partition_values: Default::default(),
                    size: *size,
                    rows: 1,
                    modification_time: *modified,
                    stats: Default::default(),
                    seq: None,
                    merged: false,
                    added_version: None,
                }),
            )
        })
        .collect()
}

/// A whole answer as s3s serializes it.
fn serialized(out: &impl s3s::xml::Serialize) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut s = Serializer::new(&mut buf);
    s.decl().unwrap();
    out.serialize(&mut s).unwrap();
    buf
}

/// The page's `Contents`, as the S3 operation builds them.
fn contents(page: &listing::Page, encode: bool) -> Option<Vec<dto::Object>> {
    Some(page.contents.iter().map(|l| object(l, encode)).collect())
}

/// The page as the S3 operation answers it: s3s serializes the whole output.
fn by_s3s(out: &dto::ListObjectsV2Output, page: &listing::Page, encode: bool) -> Vec<u8> {
    serialized(&dto::ListObjectsV2Output {
        contents: contents(page, encode),
        ..out.clone()
    })
}

fn output(page: &listing::Page, encode: bool, delimiter: Option<&str>) -> dto::ListObjectsV2Output {
    let enc = |s: &str| {
        if encode {
            urlencoding::encode(s).into_owned()
        } else {
            s.to_string()
        }
    };
    dto::ListObjectsV2Output {
        name: Some("taxi".into()),
        prefix: Some(enc("d=<&>")),
        delimiter: delimiter.map(str::to_string),
        max_keys: Some(1000),
        key_count: Some((page.contents.len() + page.common_prefixes.len()) as i32),
        continuation_token: Some("tok&en".into()),
        start_after: Some(enc("a\"b'")),
        is_truncated: Some(page.next.is_some()),
        next_continuation_token: page.next.as_ref().map(|r| r.after.clone()),
        contents: None,
        common_prefixes: Some(
            page.common_prefixes
                .iter()
                .map(|p| dto::CommonPrefix {
                    prefix: Some(enc(p)),
                })
                .collect(),
        ),
        encoding_type: encode.then(|| dto::EncodingType::from_static(dto::EncodingType::URL)),
        ..Default::default()
    }
}

fn key() -> impl Strategy<Value = String> {
    // Characters XML escapes, URL encoding changes, and more than one byte long.
    proptest::string::string_regex("[a-c=/<>&\"' é%+]{1,12}").unwrap()
}

proptest! {
    /// A page made of the kept `<Contents>` elements is byte for byte the page s3s writes,
    /// whether each element was rendered for this page or kept from an earlier one.
    #[test]
    fn pages_are_the_bytes_s3s_writes(
        entries in proptest::collection::vec((key(), 0u64..u64::MAX / 2, 0i64..4_102_444_800_000), 0..40),
        delimiter in proptest::option::of(Just("/")),
        max_keys in 1usize..12,
        encode in any::<bool>(),
        start in proptest::option::of(key()),
    ) {
        let files = files(&entries);
        let rendered = Rendered::default();
        let start = start.map(|after| Resume { after, prefix: false });
        for _ in 0..2 {
            let mut at = start.clone();
            loop {
                let page = listing::list(&files, "", delimiter, at.as_ref(), max_keys);
                let out = output(&page, encode, delimiter);
                let ours = render(&out, &rendered.contents("t", files.len(), &page, encode));
                prop_assert_eq!(
                    String::from_utf8(ours).unwrap(),
                    String::from_utf8(by_s3s(&out, &page, encode)).unwrap()
                );
                match page.next {
                    Some(next) => at = Some(next),
                    None => break,
                }
            }
        }
    }
}

#[test]
fn a_file_listed_again_with_another_size_is_rendered_again() {
    let rendered = Rendered::default();
    let page = |size| {
        listing::list(
            &files(&[("d=1/a.parquet".into(), size, 5)]),
            "",
            None,
            None,
            10,
        )
    };
    let first = rendered.contents("t", 1, &page(10), false);
    assert!(first.contains("<Size>10</Size>"));
    let again = rendered.contents("t", 1, &page(11), false);
    assert!(again.contains("<Size>11</Size>"));
    // Another table's file of the same path is its own entry.
    let other = rendered.contents("u", 1, &page(12), false);
    assert!(other.contains("<Size>12</Size>"));
    // URL-encoded keys are kept apart from plain ones.
    let encoded = rendered.contents("t", 1, &page(11), true);
    assert!(
        encoded.contains("<Key>d%3D1%2Fa.parquet</Key>"),
        "{encoded}"
    );
    let plain = rendered.contents("t", 1, &page(11), false);
    assert!(plain.contains("<Key>d=1/a.parquet</Key>"), "{plain}");
}

#[test]
fn what_is_kept_for_a_table_that_went_away_is_dropped() {
    let rendered = Rendered::default();
    let page = listing::list(
        &files(&[("d=1/a.parquet".into(), 1, 5)]),
        "",
        None,
        None,
        10,
    );
    rendered.contents("gone", 1, &page, false);
    rendered.contents("here", 1, &page, true);
    rendered.retain(|t| t == "here");
    let tables = rendered.tables.lock();
    assert!(!tables.contains_key("gone"));
    assert_eq!(tables["here"][1].len(), 1);
}

#[test]
fn the_route_takes_only_listings_of_a_bucket_by_path() {
    let route = |m: Method, uri: &str| listing(&m, &uri.parse().unwrap());
    let v2 = Some(Version::V2);
    assert_eq!(route(Method::GET, "/taxi?list-type=2"), v2);
    assert_eq!(route(Method::GET, "/taxi/?prefix=d%3D1&list-type=2"), v2);
    assert_eq!(route(Method::GET, "/acme.taxi--v3?list-type=2"), v2);
    assert_eq!(route(Method::GET, "/taxi?list-type=2&fetch-owner=true"), v2);
    // ListObjects (v1): no parameter, or only its own and a presigned URL's.
    let v1 = Some(Version::V1);
    assert_eq!(route(Method::GET, "/taxi"), v1);
    assert_eq!(route(Method::GET, "/taxi/"), v1);
    assert_eq!(
        route(
            Method::GET,
            "/taxi?prefix=d%3D1&delimiter=%2F&marker=a&max-keys=3&encoding-type=url"
        ),
        v1
    );
    assert_eq!(
        route(
            Method::GET,
            "/taxi?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=00&prefix=d"
        ),
        v1
    );
    // Other operations on a bucket stay with s3s.
    for q in [
        "location",
        "versions",
        "uploads",
        "acl",
        "policy",
        "list-type=1",
        "x-id=Foo",
    ] {
        assert_eq!(route(Method::GET, &format!("/taxi?{q}")), None, "{q}");
        assert_eq!(
            route(Method::GET, &format!("/taxi?prefix=a&{q}")),
            None,
            "{q}"
        );
    }
    assert_eq!(route(Method::HEAD, "/taxi?list-type=2"), None);
    assert_eq!(route(Method::HEAD, "/taxi"), None);
    assert_eq!(route(Method::GET, "/taxi/d=1/x.parquet?list-type=2"), None);
    assert_eq!(route(Method::GET, "/taxi/d=1/x.parquet"), None);
    assert_eq!(route(Method::GET, "/?list-type=2"), None);
    assert_eq!(route(Method::GET, "/"), None);
    assert_eq!(route(Method::GET, "/t%61xi?list-type=2"), None);
    assert_eq!(route(Method::GET, "/t%61xi"), None);
}

#[test]
fn the_query_is_read_as_s3s_reads_it() {
    let uri: Uri = "/taxi?list-type=2&prefix=d%3D2021&delimiter=%2F&max-keys=7&start-after=a%20b&continuation-token=x.y&encoding-type=url&fetch-owner=true"
        .parse()
        .unwrap();
    let i = input("taxi", &query_pairs(&uri)).unwrap();
    assert_eq!(i.bucket, "taxi");
    assert_eq!(i.prefix.as_deref(), Some("d=2021"));
    assert_eq!(i.delimiter.as_deref(), Some("/"));
    assert_eq!(i.max_keys, Some(7));
    assert_eq!(i.start_after.as_deref(), Some("a b"));
    assert_eq!(i.continuation_token.as_deref(), Some("x.y"));
    assert_eq!(i.encoding_type.as_ref().map(|e| e.as_str()), Some("url"));
    assert_eq!(i.fetch_owner, Some(true));
    let bad: Uri = "/taxi?list-type=2&max-keys=ten".parse().unwrap();
    assert!(matches!(
        input("taxi", &query_pairs(&bad)),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn the_v1_query_is_read_as_s3s_reads_it() {
    let uri: Uri = "/taxi?prefix=d%3D2021&delimiter=%2F&max-keys=7&marker=a%20b&encoding-type=url"
        .parse()
        .unwrap();
    let i = input_v1("taxi", &query_pairs(&uri)).unwrap();
    assert_eq!(i.bucket, "taxi");
    assert_eq!(i.prefix.as_deref(), Some("d=2021"));
    assert_eq!(i.delimiter.as_deref(), Some("/"));
    assert_eq!(i.max_keys, Some(7));
    assert_eq!(i.marker.as_deref(), Some("a b"));
    assert_eq!(i.encoding_type.as_ref().map(|e| e.as_str()), Some("url"));
    let bad: Uri = "/taxi?max-keys=ten".parse().unwrap();
    assert!(matches!(
        input_v1("taxi", &query_pairs(&bad)),
        Err(Error::InvalidArgument { .. })
    ));
}

/// A v1 page as the S3 operation answers it: s3s serializes the whole output.
fn by_s3s_v1(out: &dto::ListObjectsOutput, page: &listing::Page, encode: bool) -> Vec<u8> {
    serialized(&dto::ListObjectsOutput {
        contents: contents(page, encode),
        ..out.clone()
    })
}

proptest! {
    /// ListObjects (v1) pages from the kept elements are byte for byte s3s's, paged by marker,
    /// with the elements shared with v2's pages.
    #[test]
    fn v1_pages_are_the_bytes_s3s_writes(
        entries in proptest::collection::vec((key(), 0u64..u64::MAX / 2, 0i64..4_102_444_800_000), 0..40),
        delimiter in proptest::option::of(Just("/")),
        max_keys in 1usize..12,
        encode in any::<bool>(),
    ) {
        let files = files(&entries);
        let rendered = Rendered::default();
        for _ in 0..2 {
            let mut marker: Option<String> = None;
            let mut pages = 0;
            loop {
                pages += 1;
                prop_assert!(pages <= entries.len() + 1, "paging does not end");
                let at = marker.clone().map(|m| Resume::after_marker(m, "", delimiter));
                let page = listing::list(&files, "", delimiter, at.as_ref(), max_keys);
                let v2 = output(&page, encode, delimiter);
                let out = dto::ListObjectsOutput {
                    name: v2.name.clone(),
                    prefix: v2.prefix.clone(),
                    delimiter: v2.delimiter.clone(),
                    marker: marker.clone(),
                    max_keys: v2.max_keys,
                    is_truncated: v2.is_truncated,
                    next_marker: page.next.as_ref().map(|r| r.after.clone()),
                    contents: None,
                    common_prefixes: v2.common_prefixes.clone(),
                    encoding_type: v2.encoding_type.clone(),
                    ..Default::default()
                };
                // v2 renders first, so v1 pages use elements kept from v2's.
                render(&v2, &rendered.contents("t", files.len(), &page, encode));
                let ours = render_v1(&out, &rendered.contents("t", files.len(), &page, encode));
                prop_assert_eq!(
                    String::from_utf8(ours).unwrap(),
                    String::from_utf8(by_s3s_v1(&out, &page, encode)).unwrap()
                );
                match page.next {
                    Some(next) => marker = Some(next.after),
                    None => break,
                }
            }
        }
    }
}
