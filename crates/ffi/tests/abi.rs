//! The C ABI called from Rust: round trips, handles, buffers, panics, bad input.

#![allow(clippy::unwrap_used)]

use arbor_ffi::*;

fn take(b: ArborBytes) -> Vec<u8> {
    let v = copy_out(&b).expect("a live buffer");
    assert_eq!(arbor_bytes_free(b, std::ptr::null_mut()), ArborCode::Ok);
    v
}

fn message(e: ArborBytes) -> String {
    String::from_utf8(take(e)).unwrap()
}

fn open(dir: &std::path::Path) -> u64 {
    let p = dir.to_str().unwrap().as_bytes();
    let mut h = 0u64;
    let mut e = ArborBytes::EMPTY;
    let c = arbor_open(p.as_ptr(), p.len(), std::ptr::null(), 0, &mut h, &mut e);
    assert_eq!(c, ArborCode::Ok, "{}", if c == ArborCode::Ok { String::new() } else { message(e) });
    h
}

fn change_set(entries: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
    let mut out = (entries.len() as u32).to_be_bytes().to_vec();
    for (k, v) in entries {
        out.push(0);
        out.extend_from_slice(&(k.len() as u16).to_be_bytes());
        out.extend_from_slice(k);
        match v {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                out.extend_from_slice(v);
            }
        }
    }
    out
}

#[test]
fn round_trip_prove_verify_close() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(dir.path());
    let cs = change_set(&[(b"alpha", Some(b"one")), (b"beta", Some(b"two"))]);
    let (mut n, mut root) = (0u64, [0u8; 32]);
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_commit(h, cs.as_ptr(), cs.len(), &mut n, root.as_mut_ptr(), &mut e),
        ArborCode::Ok
    );
    assert_eq!(n, 1);
    let mut v = ArborBytes::EMPTY;
    assert_eq!(
        arbor_get(h, std::ptr::null(), 0, b"alpha".as_ptr(), 5, &mut v, &mut e),
        ArborCode::Ok
    );
    assert_eq!(take(v), b"one");
    let mut v = ArborBytes::EMPTY;
    assert_eq!(
        arbor_get(h, std::ptr::null(), 0, b"gamma".as_ptr(), 5, &mut v, &mut e),
        ArborCode::NotFound
    );
    message(e);
    let mut proof = ArborBytes::EMPTY;
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_prove(h, b"beta".as_ptr(), 4, &mut proof, &mut e), ArborCode::Ok);
    let proof = take(proof);
    let mut v = ArborBytes::EMPTY;
    assert_eq!(
        arbor_verify_proof(
            root.as_ptr(),
            b"beta".as_ptr(),
            4,
            proof.as_ptr(),
            proof.len(),
            &mut v,
            &mut e
        ),
        ArborCode::Ok
    );
    assert_eq!(take(v), b"two");
    let mut bad = proof.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let mut v = ArborBytes::EMPTY;
    assert_eq!(
        arbor_verify_proof(
            root.as_ptr(),
            b"beta".as_ptr(),
            4,
            bad.as_ptr(),
            bad.len(),
            &mut v,
            &mut e
        ),
        ArborCode::InvalidArgument
    );
    message(e);
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_close(h, 1000, &mut e), ArborCode::Ok);
    // Use after close and double close: errors, not undefined behaviour.
    assert_eq!(arbor_root(h, &mut n, root.as_mut_ptr(), &mut e), ArborCode::Closed);
    message(e);
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_close(h, 0, &mut e), ArborCode::Closed);
    message(e);
    // A reopened database gets another handle; the old one stays dead.
    let h2 = open(dir.path());
    assert_ne!(h, h2);
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_root(h, &mut n, root.as_mut_ptr(), &mut e), ArborCode::Closed);
    message(e);
    assert_eq!(arbor_root(h2, &mut n, root.as_mut_ptr(), std::ptr::null_mut()), ArborCode::Ok);
    assert_eq!(n, 1);
    assert_eq!(arbor_close(h2, 1000, std::ptr::null_mut()), ArborCode::Ok);
}

#[test]
fn buffers_panics_and_bad_input() {
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_debug_panic(&mut e), ArborCode::Panic);
    assert!(message(e).contains("panicked"));
    // A double free is an error.
    let mut e = ArborBytes::EMPTY;
    assert_eq!(arbor_debug_panic(&mut e), ArborCode::Panic);
    let copy = ArborBytes { ptr: e.ptr, len: e.len };
    assert_eq!(arbor_bytes_free(e, std::ptr::null_mut()), ArborCode::Ok);
    let mut e2 = ArborBytes::EMPTY;
    assert_eq!(arbor_bytes_free(copy, &mut e2), ArborCode::InvalidArgument);
    message(e2);
    // NULL with a length, lengths past the limits, non-UTF-8 paths, a bad change set.
    let mut h = 0u64;
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_open(std::ptr::null(), 5, std::ptr::null(), 0, &mut h, &mut e),
        ArborCode::InvalidArgument
    );
    message(e);
    let bad_path = [0xffu8, 0xfe];
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_open(bad_path.as_ptr(), 2, std::ptr::null(), 0, &mut h, &mut e),
        ArborCode::InvalidArgument
    );
    message(e);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("db");
    let p = p.to_str().unwrap().as_bytes();
    let toml = b"[cache]\nno_such_key = 1\n";
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_open(p.as_ptr(), p.len(), toml.as_ptr(), toml.len(), &mut h, &mut e),
        ArborCode::InvalidArgument
    );
    message(e);
    let h = open(&dir.path().join("db"));
    let key = [7u8; 128];
    let mut v = ArborBytes::EMPTY;
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_get(h, std::ptr::null(), 0, key.as_ptr(), key.len(), &mut v, &mut e),
        ArborCode::InvalidArgument
    );
    message(e);
    let mut e = ArborBytes::EMPTY;
    assert_eq!(
        arbor_get(h, key.as_ptr(), 7, key.as_ptr(), 1, &mut v, &mut e),
        ArborCode::InvalidArgument
    );
    message(e);
    for cs in [vec![0, 0, 0, 1], vec![0, 0, 0, 1, 0, 0, 1, 9, 1, 0, 0, 0, 0], vec![0, 0, 0, 0, 9]] {
        let mut e = ArborBytes::EMPTY;
        let (mut n, mut root) = (0u64, [0u8; 32]);
        assert_eq!(
            arbor_commit(h, cs.as_ptr(), cs.len(), &mut n, root.as_mut_ptr(), &mut e),
            ArborCode::InvalidArgument
        );
        message(e);
    }
    assert_eq!(arbor_close(h, 1000, std::ptr::null_mut()), ArborCode::Ok);
    // A directory holding something else is corrupt, not a new database.
    let junk = tempfile::tempdir().unwrap();
    std::fs::write(junk.path().join("CURRENT"), b"garbage\n").unwrap();
    let p = junk.path().to_str().unwrap().as_bytes();
    let mut e = ArborBytes::EMPTY;
    let mut h3 = 0u64;
    let c = arbor_open(p.as_ptr(), p.len(), std::ptr::null(), 0, &mut h3, &mut e);
    let m = message(e);
    assert!(matches!(c, ArborCode::Corrupt), "{c:?}: {m}");
}

#[test]
fn get_and_prove_at_recent_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(dir.path());
    let mut roots = Vec::new();
    for value in [&b"one"[..], b"two", b"three"] {
        let cs = change_set(&[(b"alpha", Some(value)), (b"beta", Some(b"fixed"))]);
        let (mut n, mut root) = (0u64, [0u8; 32]);
        let c =
            arbor_commit(h, cs.as_ptr(), cs.len(), &mut n, root.as_mut_ptr(), std::ptr::null_mut());
        assert_eq!(c, ArborCode::Ok);
        roots.push(root);
    }
    // Block 1 holds the first value; its proof verifies against block 1's root only.
    let mut v = ArborBytes::EMPTY;
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_at(h, 1, std::ptr::null(), 0, b"alpha".as_ptr(), 5, &mut v, &mut e);
    assert_eq!(c, ArborCode::Ok);
    assert_eq!(take(v), b"one");
    let (mut proof, mut root) = (ArborBytes::EMPTY, [0u8; 32]);
    let c = arbor_prove_at(h, 1, b"alpha".as_ptr(), 5, root.as_mut_ptr(), &mut proof, &mut e);
    assert_eq!(c, ArborCode::Ok);
    assert_eq!(root, roots[0]);
    let proof = take(proof);
    let verify = |root: &[u8; 32], v: &mut ArborBytes, e: &mut ArborBytes| {
        arbor_verify_proof(root.as_ptr(), b"alpha".as_ptr(), 5, proof.as_ptr(), proof.len(), v, e)
    };
    let mut v = ArborBytes::EMPTY;
    assert_eq!(verify(&roots[0], &mut v, &mut e), ArborCode::Ok);
    assert_eq!(take(v), b"one");
    let mut v = ArborBytes::EMPTY;
    assert_eq!(verify(&roots[2], &mut v, &mut e), ArborCode::InvalidArgument);
    message(e);
    // Block 0 (empty): absent, with an exclusion proof; a NULL root out-pointer is allowed.
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_at(h, 0, std::ptr::null(), 0, b"alpha".as_ptr(), 5, &mut v, &mut e);
    assert_eq!(c, ArborCode::NotFound);
    message(e);
    let mut proof = ArborBytes::EMPTY;
    let mut e = ArborBytes::EMPTY;
    let c = arbor_prove_at(h, 0, b"alpha".as_ptr(), 5, std::ptr::null_mut(), &mut proof, &mut e);
    assert_eq!(c, ArborCode::Ok);
    take(proof);
    // Above the head: outside the window, named in the message; bad keys still checked.
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_at(h, 4, std::ptr::null(), 0, b"alpha".as_ptr(), 5, &mut v, &mut e);
    assert_eq!(c, ArborCode::OutsideWindow);
    assert!(message(e).contains("blocks 0 to 3"));
    let (mut e, mut proof) = (ArborBytes::EMPTY, ArborBytes::EMPTY);
    let c =
        arbor_prove_at(h, u64::MAX, b"alpha".as_ptr(), 5, root.as_mut_ptr(), &mut proof, &mut e);
    assert_eq!(c, ArborCode::OutsideWindow);
    message(e);
    let key = [7u8; 128];
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_at(h, 1, std::ptr::null(), 0, key.as_ptr(), key.len(), &mut v, &mut e);
    assert_eq!(c, ArborCode::InvalidArgument);
    message(e);
    assert_eq!(arbor_close(h, 1000, std::ptr::null_mut()), ArborCode::Ok);
    let mut e = ArborBytes::EMPTY;
    let c = arbor_get_at(h, 1, std::ptr::null(), 0, b"alpha".as_ptr(), 5, &mut v, &mut e);
    assert_eq!(c, ArborCode::Closed);
    message(e);
}
