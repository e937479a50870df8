//! The committed C header is what cbindgen generates from the crate now: any difference
//! fails (regenerate with `ARBOR_REGENERATE_HEADER=1 cargo test -p ffi --test header`).

#![allow(clippy::unwrap_used)]

#[test]
fn header_matches_the_crate() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let config = cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .unwrap()
        .write(&mut generated);
    let path = format!("{dir}/include/arbor.h");
    if std::env::var_os("ARBOR_REGENERATE_HEADER").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/arbor.h differs from what cbindgen generates; regenerate it with \
         ARBOR_REGENERATE_HEADER=1 cargo test -p ffi --test header"
    );
}
