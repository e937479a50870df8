// Package arbor embeds Arbor, an authenticated state engine (Ethereum-compatible
// Merkle-Patricia tries persisted in RocksDB), through its C ABI (crates/ffi).
//
// A [DB] is one open database directory. [DB.Commit] applies a set of [Change]s to the
// main trie and to per-account storage tries as the next block and returns the new
// [Head] (block number and main-trie root); [DB.Get] reads a key; [DB.Prove] returns a
// Merkle proof that [VerifyProof] checks against a root without a database; [DB.GetAt]
// and [DB.ProveAt] do the same at any of the last history.recent_blocks blocks;
// [DB.CreateCheckpoint] writes a verifiable chunked checkpoint that [Restore] (or the
// `arbor checkpoint restore` command) turns back into a database. A DB is safe for
// concurrent use: Get, GetAt and ProveAt run in parallel with a commit.
//
// # Ethereum accounts
//
// In a database of the Ethereum layout, [DB.CommitAccounts] commits a block of
// [AccountChange]s (accounts written or removed, storage wiped, slots written, new code):
// Arbor computes the touched accounts' storage roots and folds them into the account
// leaves in the same commit. [DB.GetAccount], [DB.GetStorage] and [DB.GetCode] read the
// model back, [DB.GetProof] returns the eth_getProof answer ([AccountProof], whose JSON
// is the JSON-RPC result object), and the …At forms read at a recent block. The
// answer's AccountProof verifies with [VerifyProof] against the returned head's root
// under keccak256(address), each slot's proof against the account's StorageRoot under
// keccak256(slot).
//
// # Errors
//
// Every error this package returns is an [*Error]; errors.Is matches it against one of
// [ErrInvalidArgument], [ErrCorrupt], [ErrIO], [ErrClosed], [ErrCancelled], [ErrPanic]
// or [ErrOutsideWindow] (and [ErrInvalidProof] for a proof that does not verify). An
// absent key is not an error: Get returns (nil, nil).
//
// # Memory
//
// Go memory is lent to Rust for the duration of one call only; every buffer Rust returns
// is copied into Go memory and released at once. [LiveBuffers] reports the Rust buffers
// not yet released (zero whenever no call is running), for leak tests.
//
// # Building
//
// The package links the static library libarbor_ffi.a (which bundles RocksDB) with cgo,
// and includes the generated header crates/ffi/include/arbor.h from this repository.
// The library directory is not hard-coded: pass it in CGO_LDFLAGS. From the repository
// root:
//
//	eval "$(bash scripts/arbor.sh env)"      # sets CARGO_TARGET_DIR, RocksDB's build
//	cargo build -p ffi                       # $CARGO_TARGET_DIR/debug/libarbor_ffi.a
//	export CGO_ENABLED=1 CGO_LDFLAGS="-L$CARGO_TARGET_DIR/debug"
//	cd bindings/go && go test -race ./...
//
// or simply `bash scripts/arbor.sh go-test`. Another Go module uses the package from a
// clone of this repository with a replace directive in its go.mod:
//
//	require github.com/arbor-engine/arbor/bindings/go v0.0.0
//	replace github.com/arbor-engine/arbor/bindings/go => /path/to/arbor/bindings/go
//
// and builds with the same CGO_ENABLED and CGO_LDFLAGS (-L$CARGO_TARGET_DIR/release for
// a `cargo build --release -p ffi` library). The header's path is relative to this
// package's directory, so the clone keeps bindings/go and crates/ffi/include in place;
// the library is static, so the program needs no Arbor files at run time.
//
// # Checkpoints and storage tries
//
// A checkpoint includes a storage trie only when its account's main-trie value is an
// Ethereum account, RLP [nonce, balance, storage_root, code_hash], whose storage_root
// is that trie's root; CreateCheckpoint fails otherwise.
package arbor
