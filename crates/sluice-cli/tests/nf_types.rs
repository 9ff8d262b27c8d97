//! `sluice nf-types` lists every NF type with its summary in one aligned
//! column, however long the longest name is.

mod common;
use common::*;

#[test]
fn summaries_start_in_one_column_after_the_longest_name() {
    let out = sluice().arg("nf-types").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let registry = sluice_nfs::REGISTRY;
    assert_eq!(lines.len(), registry.len(), "{text}");
    let longest = registry.iter().map(|t| t.name.len()).max().unwrap();
    assert!(
        longest > 10,
        "the registry has names longer than 10 characters"
    );
    for (line, t) in lines.iter().zip(registry) {
        let want = format!("{:<w$}  {}", t.name, t.summary, w = longest);
        assert_eq!(*line, want, "\n{text}");
    }
}
