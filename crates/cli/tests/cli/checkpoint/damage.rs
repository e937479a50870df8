//! Damage a hostile sweep found handled badly: a chunk longer than its manifest says (a
//! foreign chunk under its name), and the temporary files a killed `checkpoint create` or
//! automatic checkpoint leaves.

use super::*;

/// The chunk of one checkpoint of `made` with the most bytes, and the one of another with
/// the fewest: their files.
fn longest_and_shortest(long: &Made, short: &Made) -> (PathBuf, PathBuf) {
    let chunks = |m: &Made| {
        let bytes = std::fs::read(m.dir.join("checkpoints").join(&m.id).join("manifest")).unwrap();
        checkpoint::Manifest::decode(&bytes).unwrap().chunks
    };
    let (a, b) = (chunks(long), chunks(short));
    let longest = a.iter().max_by_key(|c| c.len).unwrap();
    let shortest = b.iter().min_by_key(|c| c.len).unwrap();
    assert!(longest.len > shortest.len, "{} <= {}", longest.len, shortest.len);
    let file = |m: &Made, c: &checkpoint::ChunkInfo| m.dir.join(checkpoint::chunk_path(&c.digest));
    (file(long, longest), file(short, shortest))
}

/// A chunk file of another checkpoint copied over a shorter chunk's name: `verify` says
/// invalid (exit 1) and so does `restore` at once (the checkpoint proven bad: exit 1, an
/// empty database, no unfinished restore), where it used to retry for seconds, exit 3 and
/// leave a restore no rerun could finish. With the honest directory beside it the restore
/// completes and blames the copy. A database holding another state is still refused.
#[test]
fn a_chunk_longer_than_its_manifest_says_proves_the_checkpoint_bad() {
    let m = make_checkpoint("long-a", "3000", "64");
    let other = make_checkpoint("long-b", "4000", "64");
    assert_ne!(m.root, other.root);
    let (foreign, target) = longest_and_shortest(&other, &m);
    let bad = fresh_dir("long-bad");
    test_support::copy_tree(&m.dir, &bad);
    std::fs::copy(&foreign, bad.join("chunks").join(target.file_name().unwrap())).unwrap();
    let b = m.block();
    let o = arbor(&["checkpoint", "verify", "--source", s(&bad), "--block", &b, "--root", &m.root]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("larger than"), "{}", stdout(&o));

    let db = fresh_restore_db("long-alone");
    let t0 = Instant::now();
    let o = arbor(&strs(&restore_args(&db, &m, &[s(&bad)], &[])));
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert_one_line_error(&o, &format!("checkpoint {} offered by {}", m.id, s(&bad)));
    assert!(stderr(&o).contains("no source serves chunk"), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    assert_eq!(ok(&["verify", "--db", &db]), format!("{EMPTY_HEAD}\n"));
    let stats = json(&ok(&["stats", "--db", &db, "--json"]));
    assert!(stats["unfinished_bulk_load"].is_null(), "{stats}");
    // The same again: the same verdict, never "could not run".
    let o = arbor(&strs(&restore_args(&db, &m, &[s(&bad)], &[])));
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));

    // With the honest directory: restored, the copy blamed for the chunk.
    let report = fresh_dir("long-report.json");
    let args = restore_args(&db, &m, &[s(&bad), s(&m.dir)], &["--report", s(&report)]);
    ok(&strs(&args));
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());
    let r = json(&std::fs::read_to_string(&report).unwrap());
    let blamed = &r["sources"][0];
    assert_eq!(blamed["bad_chunks"], 1, "{r}");
    assert!(blamed["excluded"].as_str().unwrap().contains("larger than chunk"), "{r}");
    assert_eq!(r["sources"][1]["bad_chunks"], 0, "{r}");

    // A database at another root is not restored into, as before.
    let o = arbor(&strs(&restore_args(&db, &other, &[s(&other.dir)], &[])));
    no_panic(&o);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("not empty"), "{}", stderr(&o));
    assert_eq!(ok(&["verify", "--db", &db]), m.verified_line());
}

/// A process id no process has (above Linux's largest `pid_max`).
const DEAD_PID: u32 = 4_000_000_000;

/// Set `path`'s modification time `secs` seconds back.
fn backdate(path: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(secs)).unwrap();
}

/// Files under `dir` whose names hold `.tmp`.
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let names = files_under(dir).into_iter().filter(|p| p.to_string_lossy().contains(".tmp"));
    names.map(|p| dir.join(p)).collect()
}

/// `checkpoint create` killed mid-write leaves `chunks/<digest>.tmp<pid>-<n>` files; the
/// next create removes them (and a killed manifest write's directory), once their process
/// is gone and they are a minute old, and nothing else: a user's files, and a temporary
/// file another writer may still own (fresh, or of a running process), stay.
#[test]
fn a_killed_create_leaves_nothing_the_next_create_keeps() {
    let mut rng = ChaCha8Rng::seed_from_u64(seed("a_killed_create_leaves_nothing"));
    let m = make_checkpoint("killed-create", "60000", "256");
    let out = fresh_dir("killed-create-out");
    let create =
        ["checkpoint", "create", "--db", &m.db, "--out", s(&out), "--max-chunk-bytes", "4096"];
    let mut killed = 0;
    for _ in 0..4 {
        let delay = Duration::from_millis(rng.gen_range(50..400));
        killed += usize::from(kill_after(&create, delay));
    }
    eprintln!("killed {killed} of 4 creates");
    // Leftovers as a killed writer leaves them (its process gone), old enough to be stale.
    let digest = "ab".repeat(32);
    let id = "cd".repeat(32);
    std::fs::create_dir_all(out.join("chunks")).unwrap();
    std::fs::create_dir_all(out.join("checkpoints").join(&id)).unwrap();
    let stale = [
        out.join("chunks").join(format!("{digest}.tmp{DEAD_PID}-0")),
        out.join("checkpoints").join(&id).join(format!("manifest.tmp{DEAD_PID}-1")),
    ];
    let keep = [
        out.join("chunks").join(format!("{digest}.tmp{DEAD_PID}-2")), // fresh
        out.join("chunks").join(format!("{digest}.tmp1-3")),          // a running process
        out.join("chunks").join("notes.txt"),
        out.join("chunks").join(format!("{digest}.tmp{DEAD_PID}-4.mine")),
        out.join(format!("manifest.tmp{DEAD_PID}-5")),
    ];
    for p in stale.iter().chain(&keep) {
        std::fs::write(p, b"x").unwrap();
    }
    let fresh = &keep[0];
    // What the killed creates left, and the planted files, but the fresh one: a minute old.
    for p in temp_files(&out).iter().filter(|p| *p != fresh) {
        backdate(p, 120);
    }
    let created = json(&ok(&[&create[..], &["--json"]].concat()));
    assert_eq!(created["root"], m.root.as_str(), "{created}");
    let mut expected: Vec<PathBuf> =
        keep.iter().filter(|p| p.to_string_lossy().contains(".tmp")).cloned().collect();
    expected.sort();
    assert_eq!(temp_files(&out), expected, "temporary files after the create");
    for p in &keep {
        assert!(p.exists(), "{} removed", p.display());
    }
    assert!(!out.join("checkpoints").join(&id).exists(), "the killed manifest's directory");
    let b = m.block();
    let v = ok(&["checkpoint", "verify", "--source", s(&out), "--block", &b, "--root", &m.root]);
    assert!(v.starts_with("valid "), "{v}");
}

/// Automatic checkpoints (`[checkpoint] every_blocks, keep`): a creation killed while
/// writing its manifest leaves `checkpoints/<id>/manifest.tmp…`, which pruning used to
/// keep forever (no manifest, so no checkpoint it knew of); the next automatic checkpoint
/// removes it, keeping `keep` checkpoints and a user's files.
#[test]
fn automatic_checkpoints_remove_a_killed_creation_s_leftovers() {
    let db = fresh_db("auto-ckpt-leftovers");
    let dir = fresh_dir("auto-ckpt-leftovers");
    let id = "ef".repeat(32);
    let leftover_dir = dir.join("checkpoints").join(&id);
    std::fs::create_dir_all(&leftover_dir).unwrap();
    std::fs::create_dir_all(dir.join("chunks")).unwrap();
    let leftovers = [
        leftover_dir.join(format!("manifest.tmp{DEAD_PID}-0")),
        dir.join("chunks").join(format!("{}.tmp{DEAD_PID}-1", "12".repeat(32))),
    ];
    let mine = dir.join("chunks").join("README");
    for p in leftovers.iter().chain([&mine]) {
        std::fs::write(p, b"x").unwrap();
        backdate(p, 120);
    }
    let config = fresh_dir("auto-ckpt-leftovers.toml");
    let toml = format!("[checkpoint]\nevery_blocks = 2\nkeep = 1\ndir = {:?}\n", s(&dir));
    std::fs::write(&config, toml).unwrap();
    let load =
        ["load", "--db", &db, "--blocks", "4", "--keys", "2000", "--updates-per-block", "20"];
    ok(&[&load[..], &["--seed", "3", "--quiet", "--config", s(&config)]].concat());
    for p in &leftovers {
        assert!(!p.exists(), "{} stayed", p.display());
    }
    assert!(!leftover_dir.exists());
    assert!(mine.exists(), "a user's file was removed");
    let listed = json(&ok(&["checkpoint", "list", "--source", s(&dir), "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["block"], 4, "{listed}");
}
