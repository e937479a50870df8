package arbor

// Every call into the C ABI lives in this file: the rest of the package is plain Go.
//
// Rules kept here (see crates/ffi/src/lib.rs):
//   - Go bytes are passed as (pointer, length) for the duration of the call only; the
//     memory holds no Go pointers, and Rust keeps no pointer to it after the call.
//   - Every ArborBytes Rust returns (a value, a proof, an error message) is copied into
//     Go memory and handed back with arbor_bytes_free at once, before anything else.

/*
#cgo CFLAGS: -I${SRCDIR}/../../../crates/ffi/include
#cgo LDFLAGS: -larbor_ffi -lstdc++ -lm -ldl -lpthread -Wl,-z,noexecstack
#include "arbor.h"
*/
import "C"

import (
	"math/big"
	"unsafe"
)

// The limits of the C ABI, checked again by Rust.
const (
	// KeyMax is the longest key, in bytes.
	KeyMax = 127
	// ValueMax is the longest value, in bytes (16 MiB).
	ValueMax = 16 << 20
	// pathMax is the longest path (UTF-8 bytes).
	pathMax = 4096
	// configMax is the longest TOML configuration (1 MiB).
	configMax = 1 << 20
	// inputMax is the largest encoded change set or proof (1 GiB).
	inputMax = 1 << 30
)

// The Go constants equal the header's (a difference fails the build: a negative constant
// does not convert to uint).
const (
	_ uint = KeyMax - C.ARBOR_KEY_MAX
	_ uint = C.ARBOR_KEY_MAX - KeyMax
	_ uint = ValueMax - C.ARBOR_VALUE_MAX
	_ uint = C.ARBOR_VALUE_MAX - ValueMax
	_ uint = pathMax - C.ARBOR_PATH_MAX
	_ uint = C.ARBOR_PATH_MAX - pathMax
	_ uint = configMax - C.ARBOR_CONFIG_MAX
	_ uint = C.ARBOR_CONFIG_MAX - configMax
	_ uint = inputMax - C.ARBOR_INPUT_MAX
	_ uint = C.ARBOR_INPUT_MAX - inputMax
	_ uint = ProofSlotsMax - C.ARBOR_PROOF_SLOTS_MAX
	_ uint = C.ARBOR_PROOF_SLOTS_MAX - ProofSlotsMax
)

// code is an ArborCode.
type code int

const (
	codeOK              code = C.ARBOR_CODE_OK
	codeNotFound        code = C.ARBOR_CODE_NOT_FOUND
	codeInvalidArgument code = C.ARBOR_CODE_INVALID_ARGUMENT
	codeCorrupt         code = C.ARBOR_CODE_CORRUPT
	codeIO              code = C.ARBOR_CODE_IO
	codeClosed          code = C.ARBOR_CODE_CLOSED
	codeCancelled       code = C.ARBOR_CODE_CANCELLED
	codePanic           code = C.ARBOR_CODE_PANIC
	codeOutsideWindow   code = C.ARBOR_CODE_OUTSIDE_WINDOW
)

// in lends b to C for one call: NULL for no bytes.
func in(b []byte) (*C.uint8_t, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0])), C.size_t(len(b))
}

// inString lends s's bytes to C for one call (read only).
func inString(s string) (*C.uint8_t, C.size_t) {
	if len(s) == 0 {
		return nil, 0
	}
	return (*C.uint8_t)(unsafe.Pointer(unsafe.StringData(s))), C.size_t(len(s))
}

// take copies bytes Rust returned into Go memory and frees them. An empty buffer is
// {NULL, 0}: it is not Rust's to free and comes back as an empty, non-nil slice.
func take(b C.ArborBytes) []byte {
	if b.ptr == nil {
		return []byte{}
	}
	out := make([]byte, int(b.len))
	copy(out, unsafe.Slice((*byte)(unsafe.Pointer(b.ptr)), int(b.len)))
	// NULL error pointer: a failed free allocates no message. Freeing a buffer Rust just
	// handed out cannot fail; a bug that made it fail shows up in LiveBuffers.
	C.arbor_bytes_free(b, nil)
	return out
}

// result turns a call's code and error message into an error (nil for ARBOR_CODE_OK),
// freeing the message.
func result(op string, c C.enum_ArborCode, msg C.ArborBytes) error {
	text := string(take(msg))
	if code(c) == codeOK {
		return nil
	}
	if text == "" {
		text = "no message"
	}
	return newError(op, code(c), text)
}

func cOpen(path, config string) (uint64, error) {
	p, pn := inString(path)
	c, cn := inString(config)
	var handle C.uint64_t
	var msg C.ArborBytes
	rc := C.arbor_open(p, pn, c, cn, &handle, &msg)
	if err := result("open", rc, msg); err != nil {
		return 0, err
	}
	return uint64(handle), nil
}

func cClose(handle uint64, timeoutMS uint64) error {
	var msg C.ArborBytes
	rc := C.arbor_close(C.uint64_t(handle), C.uint64_t(timeoutMS), &msg)
	return result("close", rc, msg)
}

// cGet returns the value of key (nil when absent); account is nil for the main trie.
func cGet(handle uint64, account *[32]byte, key []byte) ([]byte, error) {
	var a *C.uint8_t
	var an C.size_t
	if account != nil {
		a, an = in(account[:])
	}
	k, kn := in(key)
	var value, msg C.ArborBytes
	rc := C.arbor_get(C.uint64_t(handle), a, an, k, kn, &value, &msg)
	v := take(value)
	if code(rc) == codeNotFound {
		take(msg)
		return nil, nil
	}
	if err := result("get", rc, msg); err != nil {
		return nil, err
	}
	return v, nil
}

// cGetAt returns the value of key at a recent block (nil when absent); account is nil
// for the main trie.
func cGetAt(handle, block uint64, account *[32]byte, key []byte) ([]byte, error) {
	var a *C.uint8_t
	var an C.size_t
	if account != nil {
		a, an = in(account[:])
	}
	k, kn := in(key)
	var value, msg C.ArborBytes
	rc := C.arbor_get_at(C.uint64_t(handle), C.uint64_t(block), a, an, k, kn, &value, &msg)
	v := take(value)
	if code(rc) == codeNotFound {
		take(msg)
		return nil, nil
	}
	if err := result("get at", rc, msg); err != nil {
		return nil, err
	}
	return v, nil
}

func cCommit(handle uint64, changes []byte) (Head, error) {
	c, cn := in(changes)
	var number C.uint64_t
	var head Head
	var msg C.ArborBytes
	rc := C.arbor_commit(C.uint64_t(handle), c, cn, &number, (*C.uint8_t)(unsafe.Pointer(&head.Root[0])), &msg)
	if err := result("commit", rc, msg); err != nil {
		return Head{}, err
	}
	head.Number = uint64(number)
	return head, nil
}

func cRoot(handle uint64) (Head, error) {
	var number C.uint64_t
	var head Head
	var msg C.ArborBytes
	rc := C.arbor_root(C.uint64_t(handle), &number, (*C.uint8_t)(unsafe.Pointer(&head.Root[0])), &msg)
	if err := result("root", rc, msg); err != nil {
		return Head{}, err
	}
	head.Number = uint64(number)
	return head, nil
}

// cTrieRoot returns the root of a trie at the head; account is nil for the main trie.
func cTrieRoot(handle uint64, account *[32]byte) ([32]byte, error) {
	var a *C.uint8_t
	var an C.size_t
	if account != nil {
		a, an = in(account[:])
	}
	var root [32]byte
	var msg C.ArborBytes
	rc := C.arbor_trie_root(C.uint64_t(handle), a, an, (*C.uint8_t)(unsafe.Pointer(&root[0])), &msg)
	if err := result("trie root", rc, msg); err != nil {
		return [32]byte{}, err
	}
	return root, nil
}

// cProve returns the encoded proof (see decodeProof).
func cProve(handle uint64, key []byte) ([]byte, error) {
	k, kn := in(key)
	var proof, msg C.ArborBytes
	rc := C.arbor_prove(C.uint64_t(handle), k, kn, &proof, &msg)
	p := take(proof)
	if err := result("prove", rc, msg); err != nil {
		return nil, err
	}
	return p, nil
}

// cProveAt returns the encoded proof of key at a recent block (see decodeProof) and
// that block's head.
func cProveAt(handle, block uint64, key []byte) ([]byte, Head, error) {
	k, kn := in(key)
	head := Head{Number: block}
	var proof, msg C.ArborBytes
	rc := C.arbor_prove_at(C.uint64_t(handle), C.uint64_t(block), k, kn, (*C.uint8_t)(unsafe.Pointer(&head.Root[0])), &proof, &msg)
	p := take(proof)
	if err := result("prove at", rc, msg); err != nil {
		return nil, Head{}, err
	}
	return p, head, nil
}

// cVerifyProof returns the proven value, nil when the proof shows key absent.
func cVerifyProof(layout string, root *[32]byte, key, proof []byte) ([]byte, error) {
	k, kn := in(key)
	p, pn := in(proof)
	var value, msg C.ArborBytes
	var rc C.enum_ArborCode
	if layout == "" {
		rc = C.arbor_verify_proof((*C.uint8_t)(unsafe.Pointer(&root[0])), k, kn, p, pn, &value, &msg)
	} else {
		l, ln := inString(layout)
		rc = C.arbor_verify_proof_in(l, ln, (*C.uint8_t)(unsafe.Pointer(&root[0])), k, kn, p, pn, &value, &msg)
	}
	v := take(value)
	if code(rc) == codeNotFound {
		take(msg)
		return nil, nil
	}
	if err := result("verify proof", rc, msg); err != nil {
		return nil, err
	}
	return v, nil
}

func cCommitAccounts(handle uint64, changes []byte) (Head, error) {
	c, cn := in(changes)
	var number C.uint64_t
	var head Head
	var msg C.ArborBytes
	rc := C.arbor_commit_accounts(C.uint64_t(handle), c, cn, &number, (*C.uint8_t)(unsafe.Pointer(&head.Root[0])), &msg)
	if err := result("commit accounts", rc, msg); err != nil {
		return Head{}, err
	}
	head.Number = uint64(number)
	return head, nil
}

// cGetAccount returns the account at address (nil when it does not exist), at the head
// when block is nil, else at *block.
func cGetAccount(handle uint64, block *uint64, address []byte) (*Account, error) {
	a, an := in(address)
	var acc C.ArborAccount
	var msg C.ArborBytes
	var rc C.enum_ArborCode
	op := "get account"
	if block == nil {
		rc = C.arbor_get_account(C.uint64_t(handle), a, an, &acc, &msg)
	} else {
		op = "get account at"
		rc = C.arbor_get_account_at(C.uint64_t(handle), C.uint64_t(*block), a, an, &acc, &msg)
	}
	if code(rc) == codeNotFound {
		take(msg)
		return nil, nil
	}
	if err := result(op, rc, msg); err != nil {
		return nil, err
	}
	balance := *(*[32]byte)(unsafe.Pointer(&acc.balance))
	return &Account{
		Nonce:       uint64(acc.nonce),
		Balance:     new(big.Int).SetBytes(balance[:]),
		StorageRoot: *(*[32]byte)(unsafe.Pointer(&acc.storage_root)),
		CodeHash:    *(*[32]byte)(unsafe.Pointer(&acc.code_hash)),
	}, nil
}

// cGetStorage returns the word in slot of address's storage, at the head when block is
// nil, else at *block.
func cGetStorage(handle uint64, block *uint64, address, slot []byte) ([32]byte, error) {
	a, an := in(address)
	s, sn := in(slot)
	var value [32]byte
	out := (*C.uint8_t)(unsafe.Pointer(&value[0]))
	var msg C.ArborBytes
	var rc C.enum_ArborCode
	op := "get storage"
	if block == nil {
		rc = C.arbor_get_storage(C.uint64_t(handle), a, an, s, sn, out, &msg)
	} else {
		op = "get storage at"
		rc = C.arbor_get_storage_at(C.uint64_t(handle), C.uint64_t(*block), a, an, s, sn, out, &msg)
	}
	if err := result(op, rc, msg); err != nil {
		return [32]byte{}, err
	}
	return value, nil
}

// cGetCode returns the code with hash (nil when the database holds none).
func cGetCode(handle uint64, hash []byte) ([]byte, error) {
	h, hn := in(hash)
	var blob, msg C.ArborBytes
	rc := C.arbor_get_code(C.uint64_t(handle), h, hn, &blob, &msg)
	c := take(blob)
	if code(rc) == codeNotFound {
		take(msg)
		return nil, nil
	}
	if err := result("get code", rc, msg); err != nil {
		return nil, err
	}
	return c, nil
}

// cGetProof returns the encoded account proof of address and slots (32-byte words one
// after another) and the head it is of: the head when block is nil, else *block.
func cGetProof(op string, handle uint64, block *uint64, address, slots []byte) ([]byte, Head, error) {
	a, an := in(address)
	s, sn := in(slots)
	var head Head
	root := (*C.uint8_t)(unsafe.Pointer(&head.Root[0]))
	var proof, msg C.ArborBytes
	var rc C.enum_ArborCode
	if block == nil {
		var number C.uint64_t
		rc = C.arbor_get_proof(C.uint64_t(handle), a, an, s, sn, &number, root, &proof, &msg)
		head.Number = uint64(number)
	} else {
		rc = C.arbor_get_proof_at(C.uint64_t(handle), C.uint64_t(*block), a, an, s, sn, root, &proof, &msg)
		head.Number = *block
	}
	p := take(proof)
	if err := result(op, rc, msg); err != nil {
		return nil, Head{}, err
	}
	return p, head, nil
}

func cLayout(handle uint64) (string, error) {
	var name, msg C.ArborBytes
	rc := C.arbor_layout(C.uint64_t(handle), &name, &msg)
	n := take(name)
	if err := result("layout", rc, msg); err != nil {
		return "", err
	}
	return string(n), nil
}

func cCheckpointCreate(handle uint64, dir string, threads uint32, token uint64) ([32]byte, error) {
	d, dn := inString(dir)
	var id [32]byte
	var msg C.ArborBytes
	rc := C.arbor_checkpoint_create(C.uint64_t(handle), d, dn, C.uint32_t(threads), C.uint64_t(token), (*C.uint8_t)(unsafe.Pointer(&id[0])), &msg)
	if err := result("create checkpoint", rc, msg); err != nil {
		return [32]byte{}, err
	}
	return id, nil
}

func cRestore(path, config string, block uint64, root *[32]byte, sources string, token uint64) error {
	p, pn := inString(path)
	c, cn := inString(config)
	s, sn := inString(sources)
	var msg C.ArborBytes
	rc := C.arbor_restore(p, pn, c, cn, C.uint64_t(block), (*C.uint8_t)(unsafe.Pointer(&root[0])), s, sn, C.uint64_t(token), &msg)
	if code(rc) == codeNotFound {
		// No source offers the checkpoint (or none could be reached): a source-side
		// failure, reported as ErrIO like the other failures of the sources.
		rc = C.ARBOR_CODE_IO
	}
	return result("restore", rc, msg)
}

func cCancelNew() uint64 {
	return uint64(C.arbor_cancel_new())
}

func cCancel(token uint64) error {
	var msg C.ArborBytes
	rc := C.arbor_cancel(C.uint64_t(token), &msg)
	return result("cancel", rc, msg)
}

func cCancelFree(token uint64) error {
	var msg C.ArborBytes
	rc := C.arbor_cancel_free(C.uint64_t(token), &msg)
	return result("cancel", rc, msg)
}

// LiveBuffers returns how many buffers Rust handed out and this process has not freed
// yet. This package frees every buffer before a call returns, so it is zero whenever no
// call is running: leak tests check it.
func LiveBuffers() uint64 {
	return uint64(C.arbor_live_buffers())
}

// debugPanic makes Rust panic (arbor_debug_panic): the panic must come back as an error
// matching ErrPanic and leave the process running. A library built without debug
// assertions (release profile) refuses with ErrInvalidArgument. For tests.
func debugPanic() error {
	var msg C.ArborBytes
	rc := C.arbor_debug_panic(&msg)
	return result("debug panic", rc, msg)
}

// nativeGetNS is the mean nanoseconds of n native Rust reads of a main-trie key (for the
// benchmarks' side-by-side figure).
func nativeGetNS(handle uint64, key []byte, n uint64) (float64, error) {
	k, kn := in(key)
	var ns C.double
	var msg C.ArborBytes
	rc := C.arbor_native_get_ns(C.uint64_t(handle), k, kn, C.uint64_t(n), &ns, &msg)
	if err := result("native get", rc, msg); err != nil {
		return 0, err
	}
	return float64(ns), nil
}

// nativeCommitNS commits an encoded change set natively and returns the nanoseconds of
// the Rust commit alone (for the benchmarks' side-by-side figure).
func nativeCommitNS(handle uint64, enc []byte) (commitNS, decodeNS float64, err error) {
	c, cn := in(enc)
	var ns, dns C.double
	var msg C.ArborBytes
	rc := C.arbor_native_commit_ns(C.uint64_t(handle), c, cn, &ns, &dns, &msg)
	if err := result("native commit", rc, msg); err != nil {
		return 0, 0, err
	}
	return float64(ns), float64(dns), nil
}
