//! The Hub reader's parsers on hostile input: ids, model-info replies, file names, ranges.

use super::*;

#[test]
fn ids_revisions_and_tags() {
    let r = HubRef::parse("unsloth/Qwen3-30B-A3B-GGUF@main:Q4_K_M")
        .unwrap()
        .unwrap();
    assert_eq!(
        (r.repo.as_str(), r.revision(), r.tag.as_deref()),
        ("unsloth/Qwen3-30B-A3B-GGUF", "main", Some("Q4_K_M"))
    );
    assert_eq!(r.to_string(), "unsloth/Qwen3-30B-A3B-GGUF@main:Q4_K_M");
    assert!(HubRef::parse("llama-3.1-8b").is_none());
    assert!(HubRef::parse("models/x.gguf/y").is_none());
    assert!(HubRef::parse("a/../b").is_none());
    assert!(matches!(
        HubRef::parse("a/.."),
        Some(Err(HubError::BadId { .. }))
    ));
    assert!(matches!(HubRef::parse("a/b:"), Some(Err(_))));
    assert!(matches!(HubRef::parse("a/b@x..y"), Some(Err(_))));
}

#[test]
fn urls_escape_what_paths_cannot_hold() {
    assert_eq!(encode("refs/pr/1", true), "refs%2Fpr%2F1");
    assert_eq!(encode("dir/a b.gguf", false), "dir/a%20b.gguf");
}

proptest::proptest! {
    #[test]
    fn any_text_parses_or_is_refused_without_panic(text in ".{0,200}") {
        if let Some(Ok(id)) = HubRef::parse(&text) {
            // What parses prints back as it was given and parses again to the same.
            proptest::prop_assert_eq!(id.to_string(), text.clone());
            proptest::prop_assert_eq!(HubRef::parse(&id.to_string()).and_then(Result::ok), Some(id));
        }
    }

    #[test]
    fn model_info_replies_never_panic(body in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
        let _ = parse_info("a/b", "main", "http://x", &body);
    }

    #[test]
    fn model_info_paths_never_climb_out(paths in proptest::collection::vec("[a-z./]{0,12}", 0..20)) {
        let siblings: Vec<_> = paths.iter().map(|p| serde_json::json!({ "rfilename": p })).collect();
        let body = serde_json::json!({ "sha": "0".repeat(40), "siblings": siblings }).to_string();
        let repo = parse_info("a/b", "main", "http://x", body.as_bytes()).unwrap();
        for f in &repo.files {
            proptest::prop_assert!(!f.starts_with('/') && f.split('/').all(|c| c != ".." && c != "." && !c.is_empty()));
        }
    }

    #[test]
    fn gguf_names_and_picks_never_panic(names in proptest::collection::vec("[A-Za-z0-9_./-]{0,40}(\\.gguf)?", 0..12), tag in proptest::option::of("[A-Za-z0-9_]{1,8}")) {
        for n in &names {
            let _ = gguf_pick::split_info(n);
        }
        if let Ok(p) = gguf_pick::pick(&names, tag.as_deref()) {
            proptest::prop_assert!(!p.parts.is_empty());
            proptest::prop_assert!(p.parts.iter().all(|f| names.contains(f)));
        }
    }
}
