//! The human summary of a [`TrieBenchReport`].

use std::fmt::Write;

use trie::LayoutName;

use crate::common::text::thousands;
use crate::common::timing::Timing;
use crate::trie_bench::report::{
    AlloyFigures, BoundReport, HashClass, IncrementalReport, OracleFigures, ProofReport,
    RootReference, RootReport, TrieBenchReport,
};

impl TrieBenchReport {
    /// A few lines for people; the JSON form carries every field.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_header(&mut out);
        render_root(&self.root, &mut out);
        match &self.bound {
            Some(b) => render_bound(b, &mut out),
            None => {
                let _ = writeln!(
                    out,
                    "\nkeccak bound: not measured in {} (it replays keccak over the lengths of \
                     Ethereum's node encodings)",
                    self.options.layout
                );
            }
        }
        render_incremental(&self.incremental, &mut out);
        render_proofs(&self.proofs, &mut out);
        out
    }

    fn render_header(&self, out: &mut String) {
        let (m, o, i) = (&self.machine, &self.options, &self.input);
        let layout = match o.layout {
            LayoutName::Ethereum => String::new(),
            other => format!(", layout {other}"),
        };
        let _ = writeln!(
            out,
            "arbor bench trie: {} keys ({}-byte random keys, {}-byte random values), seed {}{layout}",
            thousands(i.keys as u64),
            i.key_bytes,
            i.value_bytes,
            o.seed
        );
        let _ = writeln!(
            out,
            "machine: {}, {} logical cores, rayon {} threads; {}, opt-level {}, {}",
            m.cpu_model, m.logical_cores, m.rayon_threads, m.rustc, m.opt_level, m.target
        );
        if m.opt_level != "3" {
            let _ =
                writeln!(out, "WARNING: not an optimised build; numbers are not representative");
        }
        let _ = writeln!(
            out,
            "input sorted once before timing ({:.3} s, excluded from every timing); \
            timings are median [min-max] of {} runs",
            i.sort_seconds, o.runs
        );
    }
}

fn timing(t: &Timing) -> String {
    format!("{:>9.4} s [{:.4}-{:.4}]", t.seconds_median, t.seconds_min, t.seconds_max)
}

fn render_root(r: &RootReport, out: &mut String) {
    match &r.reference {
        RootReference::Alloy(a) => render_alloy(r, a, out),
        RootReference::Oracle(o) => render_oracle(r, o, out),
    }
}

fn render_alloy(r: &RootReport, a: &AlloyFigures, out: &mut String) {
    let _ = writeln!(out, "\nfull root {} (serial, parallel and alloy-trie agree)", r.root);
    let mut t = crate::common::table::table(&["engine", "median s", "min s", "max s", "note"]);
    let parallel = format!("{} threads, {:.2}x serial", r.parallel_threads, r.serial_over_parallel);
    for (name, x, note) in [
        ("arbor serial", &r.arbor_serial, String::new()),
        ("arbor parallel", &r.arbor_parallel, parallel),
        ("alloy HashBuilder", &a.alloy, String::new()),
    ] {
        t.add_row(vec![
            name.to_string(),
            format!("{:.4}", x.seconds_median),
            format!("{:.4}", x.seconds_min),
            format!("{:.4}", x.seconds_max),
            note,
        ]);
    }
    out.push_str(&crate::common::table::text(&t));
    let _ = writeln!(
        out,
        "  alloy/arbor serial {:.2}x, alloy/arbor parallel {:.2}x (>1: Arbor faster); \
         fastest runs {:.2}x, {:.2}x",
        a.alloy_over_serial,
        a.alloy_over_parallel,
        a.alloy_over_serial_fastest,
        a.alloy_over_parallel_fastest
    );
}

fn render_oracle(r: &RootReport, o: &OracleFigures, out: &mut String) {
    let _ = writeln!(out, "\nfull root {} (serial, parallel and trie-db agree)", r.root);
    let mut t =
        crate::common::table::table(&["engine", "median s", "min s", "max s", "keys/s", "note"]);
    let parallel = format!("{} threads, {:.2}x serial", r.parallel_threads, r.serial_over_parallel);
    let k = &o.keys_per_s;
    for (name, x, per_s, note) in [
        ("arbor serial", &r.arbor_serial, k.arbor_serial, String::new()),
        ("arbor parallel", &r.arbor_parallel, k.arbor_parallel, parallel),
        ("trie-db (oracle)", &o.oracle, k.oracle, String::new()),
    ] {
        t.add_row(vec![
            name.to_string(),
            format!("{:.4}", x.seconds_median),
            format!("{:.4}", x.seconds_min),
            format!("{:.4}", x.seconds_max),
            thousands(per_s.round() as u64),
            note,
        ]);
    }
    out.push_str(&crate::common::table::text(&t));
    let _ = writeln!(out, "  oracle: {}, Blake2-256 by blake2b_simd", o.oracle_engine);
    let _ = writeln!(
        out,
        "  trie-db/arbor serial {:.2}x, trie-db/arbor parallel {:.2}x (>1: Arbor faster); \
         fastest runs {:.2}x, {:.2}x",
        o.oracle_over_serial,
        o.oracle_over_parallel,
        o.oracle_over_serial_fastest,
        o.oracle_over_parallel_fastest
    );
}

fn class(name: &str, c: &HashClass) -> String {
    format!(
        "{name} {} calls x {:.1} B mean ({} single-block), {:.0} ns/call",
        thousands(c.calls),
        c.bytes_mean,
        thousands(c.single_block_calls),
        c.ns_per_call
    )
}

fn render_bound(b: &BoundReport, out: &mut String) {
    let _ = writeln!(
        out,
        "\nkeccak bound of the serial build: {} nodes hashed, {} bytes \
        (builder counted {} calls, {} bytes)",
        thousands(b.nodes_hashed),
        thousands(b.nodes_bytes),
        thousands(b.builder_hashes),
        thousands(b.builder_bytes)
    );
    let _ = writeln!(out, "  {}", class("leaves  ", &b.leaf));
    let _ = writeln!(out, "  {}", class("interior", &b.interior));
    let _ = writeln!(
        out,
        "  bound             {}\n  arbor serial / bound {:.2}x (fastest runs {:.2}x), \
         parallel / (bound/threads) {:.2}x",
        timing(&b.bound),
        b.serial_over_bound,
        b.serial_over_bound_fastest,
        b.parallel_over_bound_per_thread
    );
}

fn render_incremental(r: &IncrementalReport, out: &mut String) {
    let _ = writeln!(
        out,
        "\nincremental: {} keys, {} rounds of {} writes (half existing keys, half new) + root()",
        thousands(r.keys_initial as u64),
        r.rounds,
        r.updates_per_round
    );
    let _ = writeln!(
        out,
        "  round p50 {:.1} us, p99 {:.1} us, max {:.1} us; root() part p50 {:.1} us, p99 {:.1} us",
        r.round_us_p50, r.round_us_p99, r.round_us_max, r.root_us_p50, r.root_us_p99
    );
    let _ = writeln!(
        out,
        "  hashes per round p50 {:.0}, mean {:.1} ({:.0} bytes); final root equals a rebuild",
        r.hashes_per_round_p50, r.hashes_per_round_mean, r.hashed_bytes_per_round_mean
    );
}

fn render_proofs(p: &ProofReport, out: &mut String) {
    let _ = writeln!(
        out,
        "\nproofs: {} random existing keys, {:.1} nodes / {:.0} bytes each",
        thousands(p.proofs as u64),
        p.nodes_per_proof_mean,
        p.bytes_per_proof_mean
    );
    let _ = writeln!(
        out,
        "  generated {:.0}/s, verified {:.0}/s",
        p.generated_per_second, p.verified_per_second
    );
}
