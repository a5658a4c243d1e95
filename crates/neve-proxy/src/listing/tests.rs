use super::*;
use proptest::prelude::*;

fn files(keys: &[String]) -> BTreeMap<String, Arc<AddFile>> {
    let mut m: BTreeMap<String, Arc<AddFile>> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            (
                format!("{DATA}{k}"),
                Arc::new(AddFile {
                    path: format!("{DATA}{k}"),
                    partition_values: Default::default(),
                    size: i as u64,
                    rows: 1,
                    modification_time: 0,
                    stats: Default::default(),
                    seq: None,
                    merged: false,
                    added_version: None,
                }),
            )
        })
        .collect();
    // Log paths sort before `_data/` and other folders after it: never listed.
    for other in ["_log/00000000000000000000.json", "_zz/x", "a/b"] {
        m.insert(
            other.to_string(),
            Arc::new(AddFile {
                path: other.into(),
                partition_values: Default::default(),
                size: 0,
                rows: 0,
                modification_time: 0,
                stats: Default::default(),
                seq: None,
                merged: false,
                added_version: None,
            }),
        );
    }
    m
}

/// What a full listing shows, by the S3 rules, computed the plain way.
fn reference(keys: &[String], prefix: &str, delimiter: Option<&str>) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut sorted: Vec<&String> = keys.iter().filter(|k| k.starts_with(prefix)).collect();
    sorted.sort();
    sorted.dedup();
    for k in sorted {
        let rest = &k[prefix.len()..];
        match delimiter.and_then(|d| rest.find(d).map(|i| (i, d))) {
            Some((i, d)) => {
                let cp = format!("{prefix}{}", &rest[..i + d.len()]);
                if out.last() != Some(&(cp.clone(), true)) {
                    out.push((cp, true));
                }
            }
            None => out.push((k.clone(), false)),
        }
    }
    out
}

fn page_entries(p: &Page) -> Vec<(String, bool)> {
    let mut v: Vec<(String, bool)> = p
        .contents
        .iter()
        .map(|l| (l.key.clone(), false))
        .chain(p.common_prefixes.iter().map(|c| (c.clone(), true)))
        .collect();
    v.sort();
    v
}

fn key_strategy() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof!["d=1", "d=2", "d=10", "a", "part-x", "/", "=", "é"],
        1..5,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #[test]
    fn paging_through_a_listing_shows_each_entry_once_in_order(
        keys in proptest::collection::vec(key_strategy(), 0..60),
        prefix in prop_oneof![Just(""), Just("d="), Just("d=1"), Just("d=1/"), Just("a")],
        delimiter in prop_oneof![Just(None), Just(Some("/")), Just(Some("=")), Just(Some("d=1"))],
        max_keys in 1usize..7,
    ) {
        let m = files(&keys);
        let want = reference(&keys, prefix, delimiter);
        let mut got = Vec::new();
        let mut start: Option<Resume> = None;
        for _ in 0..200 {
            let page = list(&m, prefix, delimiter, start.as_ref(), max_keys);
            prop_assert!(page.contents.len() + page.common_prefixes.len() <= max_keys);
            got.extend(page_entries(&page));
            match page.next {
                Some(n) => start = Some(n),
                None => break,
            }
        }
        prop_assert_eq!(&got, &want);

        // ListObjects (v1): the client sends back only the last entry, as `marker`.
        let mut got = Vec::new();
        let mut start: Option<Resume> = None;
        for _ in 0..200 {
            let page = list(&m, prefix, delimiter, start.as_ref(), max_keys);
            got.extend(page_entries(&page));
            match page.next {
                Some(n) => start = Some(Resume::after_marker(n.after, prefix, delimiter)),
                None => break,
            }
        }
        prop_assert_eq!(got, want);
    }
}

#[test]
fn max_keys_zero_and_the_ceiling() {
    let keys: Vec<String> = (0..1500).map(|i| format!("k{i:05}")).collect();
    let m = files(&keys);
    let p = list(&m, "", None, None, 0);
    assert!(p.contents.is_empty() && p.next.is_none());
    let p = list(&m, "", None, None, 5000);
    assert_eq!(p.contents.len(), MAX_KEYS);
    assert_eq!(p.next.unwrap().after, "k00999");
}

#[test]
fn tokens_are_bound_to_the_secret_and_the_bucket() {
    let at = Resume {
        after: "d=1/x".into(),
        prefix: false,
    };
    let t = encode_token("secret-a", "taxi", 7, &at);
    assert_eq!(
        decode_token("secret-a", "taxi", &t).unwrap(),
        (7, at.clone())
    );
    assert!(decode_token("secret-b", "taxi", &t).is_err(), "another key");
    assert!(
        decode_token("secret-a", "other", &t).is_err(),
        "another bucket"
    );
    // A client that edits the position (to list elsewhere) breaks the signature.
    let (body, tag) = t.split_once('.').unwrap();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut raw = b64.decode(body).unwrap();
    let text = String::from_utf8(raw.clone())
        .unwrap()
        .replace("d=1/x", "../_lo");
    raw = text.into_bytes();
    let forged = format!("{}.{tag}", b64.encode(&raw));
    assert!(decode_token("secret-a", "taxi", &forged).is_err());
    for junk in ["", ".", "abc", "a.b", "eyJ9.eyJ9"] {
        assert!(decode_token("secret-a", "taxi", junk).is_err(), "{junk}");
    }
}
