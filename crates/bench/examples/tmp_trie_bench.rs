//! Temporary: run the trie bench once with defaults.
fn main() -> anyhow::Result<()> {
    let keys = std::env::args().nth(1).map_or(Ok(1_000_000), |s| s.parse())?;
    let runs = std::env::args().nth(2).map_or(Ok(5), |s| s.parse())?;
    let opts = bench::TrieBenchOpts { keys, runs, ..Default::default() };
    let report = bench::trie_bench(&opts, true)?;
    println!("{}", report.render());
    std::fs::write("/tmp/trie_bench.json", serde_json::to_string_pretty(&report)?)?;
    Ok(())
}
