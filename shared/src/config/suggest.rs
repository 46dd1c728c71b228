//! "Did you mean": an unknown key in a config (serde's `unknown field
//! `x`, expected one of …`) gets the allowed key closest to it by edit
//! distance, when one is close enough to be what was meant.

/// The message with `did you mean `key`?` appended when it is serde's
/// unknown-field error and one of the allowed keys is near the unknown
/// one; else the message unchanged.
pub(super) fn with_suggestion(message: String) -> String {
    let Some((unknown, allowed)) = unknown_field(&message) else {
        return message;
    };
    match closest(unknown, &allowed) {
        Some(key) => format!("{message}\ndid you mean `{key}`?"),
        None => message,
    }
}

/// The unknown key and the keys serde lists as allowed.
fn unknown_field(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = &message[message.find("unknown field `")? + "unknown field `".len()..];
    let (unknown, rest) = rest.split_once('`')?;
    let listed = rest.split_once("expected ")?.1;
    let allowed = listed.split('`').skip(1).step_by(2).collect();
    Some((unknown, allowed))
}

/// The allowed key nearest `unknown`: within a third of its length in
/// edits (at least 2), the nearest first, ties to the earlier listed.
fn closest<'a>(unknown: &str, allowed: &[&'a str]) -> Option<&'a str> {
    let limit = (unknown.chars().count() / 3).max(2);
    allowed
        .iter()
        .map(|&key| (distance(unknown, key), key))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, key)| key)
}

/// Edits (insert, delete, substitute, swap two neighbours) from `a` to
/// `b`: the optimal-string-alignment distance.
fn distance(a: &str, b: &str) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_count_edits_and_swaps() {
        assert_eq!(distance("learning_start", "learning_starts"), 1);
        assert_eq!(distance("batchsize", "batch_size"), 1);
        assert_eq!(distance("gmama", "gamma"), 1);
        assert_eq!(distance("", "lr"), 2);
        assert_eq!(distance("lr", "lr"), 0);
    }

    #[test]
    fn a_far_key_gets_no_suggestion() {
        let m = "unknown field `color`, expected one of `lr`, `gamma`".to_string();
        assert_eq!(with_suggestion(m.clone()), m);
        let m = "unknown field `gama`, expected `gamma`".to_string();
        assert!(with_suggestion(m).ends_with("did you mean `gamma`?"));
        let m = "invalid type: string \"x\", expected u64".to_string();
        assert_eq!(with_suggestion(m.clone()), m);
    }
}
