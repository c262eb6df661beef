//! "Did you mean": the known words nearest a word given, for messages about a name that is
//! not known (a filter, a filter's setting).
//!
//! Invariants: the nearest are those within a few edits of the word (about a third of its
//! length, at least 1), closest first, at most `MOST`; none is offered where none is near.

/// The most names a message offers.
pub const MOST: usize = 3;

/// The names of `known` nearest `word` (case ignored): closest first, `MOST` at most.
pub fn nearest<'k>(word: &str, known: &[&'k str]) -> Vec<&'k str> {
    let word = word.to_ascii_lowercase();
    let most = (word.chars().count() / 3).max(1);
    let mut near: Vec<(usize, &str)> = known
        .iter()
        .map(|k| (edits(&word, &k.to_ascii_lowercase()), *k))
        .filter(|(d, k)| *d <= most || (k.starts_with(word.as_str()) && word.len() >= 2))
        .collect();
    near.sort();
    near.into_iter().take(MOST).map(|(_, k)| k).collect()
}

/// The words' Damerau–Levenshtein distance (optimal string alignment): a swap of two
/// letters side by side counts one.
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// "; did you mean 'x'?" (or "'x' or 'y'"), or nothing where nothing is near.
pub fn did_you_mean(word: &str, known: &[&str]) -> String {
    let near = nearest(word, known);
    match near.as_slice() {
        [] => String::new(),
        [one] => format!("; did you mean '{one}'?"),
        more => {
            let quoted: Vec<String> = more.iter().map(|n| format!("'{n}'")).collect();
            format!("; did you mean {}?", quoted.join(" or "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILTERS: &[&str] = &["blur", "gauss", "gray", "gain", "scale", "crop", "sobel"];

    #[test]
    fn near_names_are_offered_closest_first() {
        assert_eq!(nearest("blurr", FILTERS), ["blur"]);
        assert_eq!(nearest("Gaus", FILTERS), ["gauss"]);
        assert_eq!(nearest("grey", FILTERS), ["gray"]);
        assert_eq!(nearest("sacle", FILTERS), ["scale"]);
        assert!(nearest("zzzzzz", FILTERS).is_empty());
        assert_eq!(did_you_mean("blurr", FILTERS), "; did you mean 'blur'?");
        assert_eq!(did_you_mean("qqqq", FILTERS), "");
    }
}
