//! Which GGUF files of a repository llama.cpp's `-hf ORG/NAME[:TAG]` loads: the model file for
//! the tag (every part of a split one) and the projector beside it. The rules follow
//! `common_download_get_hf_plan` in llama.cpp's common/download.cpp (b11312): a tag is found
//! case-insensitively followed by `.` or `-`; without one, Q4_K_M, then Q8_0, then the first
//! model file; a projector is the `mmproj` file in the deepest folder the model's path shares,
//! nearest in bits to the model's tag.

/// A file name's split and quantization: `PREFIX[-0000k-of-0000N].gguf`, TAG the last `-`/`.`
/// part of PREFIX.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitInfo {
    /// The name without the split suffix and `.gguf`.
    pub prefix: String,
    /// The quantization tag, upper-cased (`Q4_K_M`), or empty.
    pub tag: String,
    /// This part's number, from 1.
    pub index: u32,
    /// Parts in all (1 when not split).
    pub count: u32,
}

/// Splits a `.gguf` path into its [`SplitInfo`]; `None` for any other file.
pub fn split_info(path: &str) -> Option<SplitInfo> {
    let mut prefix = path.strip_suffix(".gguf")?.to_string();
    let (mut index, mut count) = (1, 1);
    if let Some((head, total)) = prefix.rsplit_once("-of-") {
        if let Some((stem, no)) = head.rsplit_once('-') {
            let five = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
            if five(no) && five(total) && !stem.is_empty() {
                index = no.parse().unwrap_or(1);
                count = total.parse().unwrap_or(1);
                prefix = stem.to_string();
            }
        }
    }
    let tail = prefix.rsplit(['-', '.']).next().unwrap_or("");
    let has_sep = prefix.len() > tail.len();
    let tag = if has_sep
        && !tail.is_empty()
        && tail.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        tail.to_ascii_uppercase()
    } else {
        String::new()
    };
    Some(SplitInfo {
        prefix,
        tag,
        index,
        count,
    })
}

/// The leading number of a tag's first digits: Q4_K_M → 4, F16 → 16, none → 0.
fn tag_bits(tag: &str) -> u32 {
    let digits: String = tag
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap_or(0)
}

/// A model file, not a projector, an importance matrix or a draft head.
pub fn is_model(path: &str) -> bool {
    if !path.ends_with(".gguf") {
        return false;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    ["mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"]
        .iter()
        .all(|k| !name.contains(k))
}

/// Whether `path` holds `tag` followed by `.` or `-`, ignoring case.
fn has_tag(path: &str, tag: &str) -> bool {
    let (p, t) = (path.to_ascii_lowercase(), tag.to_ascii_lowercase());
    p.match_indices(&t)
        .any(|(i, _)| matches!(p.as_bytes().get(i + t.len()), Some(b'.' | b'-')))
}

/// What llama.cpp loads for a tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufPick {
    /// The model's files, part 1 first.
    pub parts: Vec<String>,
    /// The projector, when the repository has one.
    pub mmproj: Option<String>,
}

/// The files llama.cpp's `-hf REPO[:TAG]` loads from `files` (in the repository's order), or
/// the tags there are when none matches.
pub fn pick(files: &[String], tag: Option<&str>) -> Result<GgufPick, Vec<String>> {
    let wanted: Vec<&str> = match tag {
        Some(t) => vec![t],
        None => vec!["Q4_K_M", "Q8_0"],
    };
    let first_part =
        |f: &&String| is_model(f) && split_info(f).is_some_and(|s| s.count <= 1 || s.index == 1);
    let primary = wanted
        .iter()
        .find_map(|t| files.iter().filter(first_part).find(|f| has_tag(f, t)))
        .or_else(|| files.iter().filter(first_part).find(|_| tag.is_none()));
    let Some(primary) = primary else {
        let mut tags: Vec<String> = files
            .iter()
            .filter(first_part)
            .filter_map(|f| split_info(f).map(|s| s.tag))
            .filter(|t| !t.is_empty())
            .collect();
        tags.dedup();
        return Err(tags);
    };
    let info = split_info(primary).unwrap_or(SplitInfo {
        prefix: primary.clone(),
        tag: String::new(),
        index: 1,
        count: 1,
    });
    let mut parts: Vec<(u32, String)> = if info.count <= 1 {
        vec![(1, primary.clone())]
    } else {
        files
            .iter()
            .filter_map(|f| {
                let s = split_info(f)?;
                (s.count == info.count && s.prefix == info.prefix).then(|| (s.index, f.clone()))
            })
            .collect()
    };
    parts.sort();
    Ok(GgufPick {
        parts: parts.into_iter().map(|(_, f)| f).collect(),
        mmproj: projector(files, primary),
    })
}

/// The `mmproj` file for `model`: in a folder the model's path starts with (the deepest such),
/// then nearest in bits to the model's tag; ties go to the first listed.
fn projector(files: &[String], model: &str) -> Option<String> {
    let model_dirs: Vec<&str> = model.split('/').collect();
    let model_dirs = &model_dirs[..model_dirs.len() - 1];
    let bits = split_info(model).map_or(0, |s| tag_bits(&s.tag));
    let mut best: Option<(usize, u32, &String)> = None;
    for f in files {
        if !f.ends_with(".gguf") || !f.contains("mmproj") {
            continue;
        }
        let dirs: Vec<&str> = f.split('/').collect();
        let dirs = &dirs[..dirs.len() - 1];
        if dirs.len() > model_dirs.len() || model_dirs[..dirs.len()] != *dirs {
            continue;
        }
        let diff = split_info(f).map_or(0, |s| tag_bits(&s.tag)).abs_diff(bits);
        let better = match best {
            None => true,
            Some((depth, d, _)) => dirs.len() > depth || (dirs.len() == depth && diff < d),
        };
        if better {
            best = Some((dirs.len(), diff, f));
        }
    }
    best.map(|(_, _, f)| f.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tags_and_splits_are_read_from_names() {
        let s = split_info("Q4_K_M/Model-Q4_K_M-00002-of-00003.gguf").unwrap();
        assert_eq!(
            (s.prefix.as_str(), s.tag.as_str(), s.index, s.count),
            ("Q4_K_M/Model-Q4_K_M", "Q4_K_M", 2, 3)
        );
        assert_eq!(split_info("model.q8_0.gguf").unwrap().tag, "Q8_0");
        assert_eq!(split_info("model.bin"), None);
        assert_eq!(tag_bits("BF16"), 16);
        assert_eq!(tag_bits("IQ4_XS"), 4);
    }

    #[test]
    fn picks_the_tag_then_the_defaults_then_the_first_model() {
        let repo = files(&[
            "README.md",
            "Qwen3-8B-Q2_K.gguf",
            "Qwen3-8B-Q4_K_M.gguf",
            "Qwen3-8B-Q8_0.gguf",
            "mmproj-F16.gguf",
            "mmproj-Q8_0.gguf",
        ]);
        let p = pick(&repo, Some("q8_0")).unwrap();
        assert_eq!(p.parts, ["Qwen3-8B-Q8_0.gguf"]);
        assert_eq!(p.mmproj.as_deref(), Some("mmproj-Q8_0.gguf"));
        let p = pick(&repo, None).unwrap();
        assert_eq!(p.parts, ["Qwen3-8B-Q4_K_M.gguf"]);
        // Q4 is 4 bits from Q8 and 12 from F16.
        assert_eq!(p.mmproj.as_deref(), Some("mmproj-Q8_0.gguf"));
        assert_eq!(
            pick(&repo, Some("Q5_K_M")).unwrap_err(),
            ["Q2_K", "Q4_K_M", "Q8_0"]
        );
        let only = files(&["a-IQ2_XS.gguf"]);
        assert_eq!(pick(&only, None).unwrap().parts, ["a-IQ2_XS.gguf"]);
    }

    #[test]
    fn a_split_model_is_every_part_in_order() {
        let repo = files(&[
            "Q4_K_M/M-Q4_K_M-00002-of-00002.gguf",
            "Q4_K_M/M-Q4_K_M-00001-of-00002.gguf",
            "Q8_0/M-Q8_0-00001-of-00002.gguf",
            "Q8_0/M-Q8_0-00002-of-00002.gguf",
            "Q8_0/mmproj-BF16.gguf",
            "mmproj-F32.gguf",
        ]);
        let p = pick(&repo, Some("Q4_K_M")).unwrap();
        assert_eq!(
            p.parts,
            [
                "Q4_K_M/M-Q4_K_M-00001-of-00002.gguf",
                "Q4_K_M/M-Q4_K_M-00002-of-00002.gguf"
            ]
        );
        // Q8_0/mmproj-BF16 is in a folder the Q4_K_M model is not in.
        assert_eq!(p.mmproj.as_deref(), Some("mmproj-F32.gguf"));
        let p = pick(&repo, Some("Q8_0")).unwrap();
        assert_eq!(p.mmproj.as_deref(), Some("Q8_0/mmproj-BF16.gguf"));
    }
}
