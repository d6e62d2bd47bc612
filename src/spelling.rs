//! The nearest of some known words to a mistyped one, for "did you mean …?".

/// The candidate within a few edits of `word` (a quarter of its length, one to three), the
/// nearest first; words are compared by their first 64 characters.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let word: String = word.trim().to_ascii_lowercase().chars().take(64).collect();
    let limit = (word.chars().count() / 4).clamp(1, 3);
    candidates
        .into_iter()
        .map(|c| (edit_distance(&word, c), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn typos_find_their_word_and_strangers_find_none() {
        let words = ["vulkan", "opencl", "cuda"];
        assert_eq!(closest("vulcan", words), Some("vulkan"));
        assert_eq!(closest("OpenCL", words), Some("opencl"));
        assert_eq!(closest("metal-x", words), None);
        assert_eq!(closest(&"x".repeat(10_000), words), None);
    }
}
