//! Bytes crossing the C ABI: borrowed inputs (checked, valid for the call only) and
//! Rust-owned outputs ([`ArborBytes`]) that the caller frees with `arbor_bytes_free`.
//!
//! Every owned buffer handed out is recorded in a registry: freeing one checks it (a double
//! free or a foreign pointer is an error, not undefined behaviour), and
//! `arbor_live_buffers` counts what is still out (leak tests).

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::error::FfiError;

/// Bytes owned by Rust, handed to the caller; free them with `arbor_bytes_free`. An empty
/// value is `{NULL, 0}` and needs no free.
#[repr(C)]
#[derive(Debug)]
pub struct ArborBytes {
    /// First byte (NULL when empty).
    pub ptr: *mut u8,
    /// Number of bytes.
    pub len: usize,
}

impl ArborBytes {
    /// No bytes.
    pub const EMPTY: ArborBytes = ArborBytes { ptr: std::ptr::null_mut(), len: 0 };
}

/// Buffers out: address → length.
fn live() -> &'static Mutex<HashMap<usize, usize>> {
    static LIVE: OnceLock<Mutex<HashMap<usize, usize>>> = OnceLock::new();
    LIVE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Hand `bytes` to the caller.
pub(crate) fn give(bytes: Vec<u8>) -> ArborBytes {
    if bytes.is_empty() {
        return ArborBytes::EMPTY;
    }
    let b: Box<[u8]> = bytes.into_boxed_slice();
    let len = b.len();
    let ptr = Box::into_raw(b).cast::<u8>();
    live().lock().insert(ptr as usize, len);
    ArborBytes { ptr, len }
}

/// Take back a buffer [`give`] handed out.
pub(crate) fn take_back(b: &ArborBytes) -> Result<(), FfiError> {
    if b.ptr.is_null() {
        return if b.len == 0 {
            Ok(())
        } else {
            Err(FfiError::invalid("NULL buffer of non-zero length"))
        };
    }
    let Some(len) = live().lock().remove(&(b.ptr as usize)) else {
        return Err(FfiError::invalid("not a live Arbor buffer (freed twice, or not Arbor's)"));
    };
    if len != b.len {
        live().lock().insert(b.ptr as usize, len);
        return Err(FfiError::invalid("buffer length differs from the one handed out"));
    }
    let slice = std::ptr::slice_from_raw_parts_mut(b.ptr, len);
    // SAFETY: `slice` is exactly the `Box<[u8]>` that `give` leaked (the registry had this
    // address with this length, and removing it makes this the only reclaim).
    #[allow(unsafe_code)]
    drop(unsafe { Box::from_raw(slice) });
    Ok(())
}

/// A copy of a live buffer's bytes (`None` when `b` is not a live Arbor buffer): a safe
/// read for Rust callers and tests.
pub fn copy_out(b: &ArborBytes) -> Option<Vec<u8>> {
    if b.ptr.is_null() {
        return (b.len == 0).then(Vec::new);
    }
    let live = live().lock();
    if live.get(&(b.ptr as usize)) != Some(&b.len) {
        return None;
    }
    // SAFETY: the registry (held locked, so no free runs meanwhile) has this address with
    // this length: it is a live `Box<[u8]>` that `give` leaked.
    #[allow(unsafe_code)]
    let bytes = unsafe { std::slice::from_raw_parts(b.ptr, b.len) };
    Some(bytes.to_vec())
}

/// Buffers handed out and not freed.
pub(crate) fn live_count() -> usize {
    live().lock().len()
}

/// A caller's input bytes for the duration of one call.
pub(crate) fn input<'a>(
    ptr: *const u8,
    len: usize,
    what: &'static str,
    max: usize,
) -> Result<&'a [u8], FfiError> {
    if len > max {
        return Err(FfiError::invalid_owned(format!(
            "{what}: {len} bytes exceed the {max}-byte limit"
        )));
    }
    if ptr.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(FfiError::invalid_owned(format!("{what}: NULL with length {len}")))
        };
    }
    // SAFETY: the C contract (arbor.h): a non-NULL input points at `len` readable bytes that
    // stay valid and unchanged until the call returns; the slice does not outlive the call
    // (every caller copies what it keeps).
    #[allow(unsafe_code)]
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Write `value` to a caller's out-pointer (ignored when NULL).
pub(crate) fn put<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: the C contract: a non-NULL out-pointer points at writable, aligned memory
        // for one `T`; writing does not read the old value (it may be uninitialised).
        #[allow(unsafe_code)]
        unsafe {
            out.write(value)
        };
    }
}
