package arbor

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// DefaultCloseTimeout is how long Close waits for calls in flight when its context has
// no deadline.
const DefaultCloseTimeout = time.Hour

// Trie names one trie of the state: the main (account) trie, or the storage trie of one
// account. The zero Trie is MainTrie.
type Trie struct {
	account [32]byte
	storage bool
}

// MainTrie is the main (account) trie, whose root is the state root.
var MainTrie = Trie{}

// StorageTrie is the storage trie of the account whose main-trie key is account (for
// Ethereum: keccak256 of the address).
func StorageTrie(account [32]byte) Trie {
	return Trie{account: account, storage: true}
}

// IsMain reports whether t is the main trie.
func (t Trie) IsMain() bool { return !t.storage }

// Account returns the account key of a storage trie, and false for the main trie.
func (t Trie) Account() ([32]byte, bool) { return t.account, t.storage }

// String returns "main" or "storage(0x…)".
func (t Trie) String() string {
	if !t.storage {
		return "main"
	}
	return "storage(0x" + hex.EncodeToString(t.account[:]) + ")"
}

// Change is one write of a commit: Value set at Key in Trie, or Key deleted when Value
// is nil or empty (a stored value is never empty). Within one commit a later change of
// the same key wins.
type Change struct {
	Trie  Trie
	Key   []byte
	Value []byte
}

// Head is a block the database holds: its number and its state (main-trie) root.
type Head struct {
	Number uint64
	Root   [32]byte
}

// String returns "<number> 0x<root>", as `arbor verify` prints them.
func (h Head) String() string {
	return strconv.FormatUint(h.Number, 10) + " 0x" + hex.EncodeToString(h.Root[:])
}

// Option configures Open and Restore.
type Option func(*options)

type options struct {
	config string
	layout string
}

// WithConfigTOML sets the store configuration, a TOML document in the format of the
// `arbor` command's --config file (every key optional; see crates/store). Rust
// validates it: a bad one fails with ErrInvalidArgument. Without it (or with ""), the
// built-in defaults apply.
func WithConfigTOML(toml string) Option {
	return func(o *options) { o.config = toml }
}

// The trie layouts a database can hold; WithLayout names one.
const (
	// LayoutEthereum is Ethereum's Merkle-Patricia trie (keccak256, RLP, extension nodes).
	LayoutEthereum = "ethereum"
	// LayoutSubstrateV0 is Substrate's trie, every value inline (Blake2-256, SCALE).
	LayoutSubstrateV0 = "substrate-v0"
	// LayoutSubstrateV1 is Substrate's trie with values of 33 bytes or more in value nodes.
	LayoutSubstrateV1 = "substrate-v1"
)

// WithLayout creates a new database with the given trie layout (LayoutEthereum,
// LayoutSubstrateV0 or LayoutSubstrateV1), or requires an existing database to have it:
// a database records its layout when it is created, and opening it with another is an
// error. Without it a new database is Ethereum's and an existing one opens in its own.
// It adds `layout = "…"` to the configuration (do not also set layout in WithConfigTOML).
func WithLayout(layout string) Option {
	return func(o *options) { o.layout = layout }
}

func collect(op string, opts []Option) (options, error) {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if len(o.config) > configMax {
		return o, invalid(op, fmt.Sprintf("config: %d bytes exceed the %d-byte limit", len(o.config), configMax))
	}
	if !utf8.ValidString(o.config) {
		return o, invalid(op, "config is not UTF-8")
	}
	// TOML syntax is checked here, before any call; Rust then checks the keys and ranges.
	var doc map[string]any
	if _, err := toml.Decode(o.config, &doc); err != nil {
		return o, invalid(op, "config is not TOML: "+err.Error())
	}
	if o.layout != "" {
		if err := checkLayout(op, o.layout); err != nil {
			return o, err
		}
		if _, ok := doc["layout"]; ok {
			return o, invalid(op, "layout is given both by WithLayout and in the config")
		}
		// A top-level key goes before the tables.
		o.config = "layout = \"" + o.layout + "\"\n" + o.config
	}
	return o, nil
}

// checkLayout refuses a name that is no layout.
func checkLayout(op, layout string) error {
	switch layout {
	case LayoutEthereum, LayoutSubstrateV0, LayoutSubstrateV1:
		return nil
	}
	return invalid(op, fmt.Sprintf("unknown layout %q: expected %s, %s or %s", layout, LayoutEthereum, LayoutSubstrateV0, LayoutSubstrateV1))
}

func checkPath(op, what, path string) error {
	switch {
	case path == "":
		return invalid(op, what+" is empty")
	case len(path) > pathMax:
		return invalid(op, fmt.Sprintf("%s: %d bytes exceed the %d-byte limit", what, len(path), pathMax))
	case !utf8.ValidString(path):
		return invalid(op, what+" is not UTF-8")
	case strings.IndexByte(path, 0) >= 0:
		return invalid(op, what+" contains a NUL byte")
	}
	return nil
}

// testHookCall, when set (by tests, before the goroutines that use it start), runs just
// before Commit and CreateCheckpoint call into Rust.
var testHookCall func(op string)

// DB is an open Arbor database. Its methods are safe for concurrent use: Get, GetAt and
// ProveAt run in parallel with a commit, while commits, Root, Prove and the start of
// CreateCheckpoint take turns. Close it when done (a DB that is not closed keeps its directory locked
// until the process exits).
type DB struct {
	handle uint64
	closed atomic.Bool
}

// Open opens the database in directory dir, creating it (and the directory) when absent
// or empty. A damaged database, or a RocksDB database that is not Arbor's, fails with
// ErrCorrupt, and so does a non-empty directory that holds no database; a directory
// another DB holds open (under any spelling of its path) fails with ErrIO.
func Open(dir string, opts ...Option) (*DB, error) {
	if err := checkPath("open", "dir", dir); err != nil {
		return nil, err
	}
	o, err := collect("open", opts)
	if err != nil {
		return nil, err
	}
	h, err := cOpen(dir, o.config)
	if err != nil {
		return nil, err
	}
	return &DB{handle: h}, nil
}

// use returns the handle for a call, or ErrClosed once Close has begun (Rust checks the
// handle again: a call racing with Close fails with ErrClosed or is waited for).
func (db *DB) use(op string) (uint64, error) {
	if db == nil || db.closed.Load() {
		return 0, closedError(op)
	}
	return db.handle, nil
}

// Get returns the value of key in trie at the head, or (nil, nil) when the key is
// absent. The key must not be nil and is at most KeyMax bytes.
func (db *DB) Get(trie Trie, key []byte) ([]byte, error) {
	h, err := db.use("get")
	if err != nil {
		return nil, err
	}
	if err := checkKey("get", key); err != nil {
		return nil, err
	}
	if trie.storage {
		return cGet(h, &trie.account, key)
	}
	return cGet(h, nil, key)
}

// GetAt returns the value of key in trie at a recent block, any of head -
// history.recent_blocks (128 by default, see WithConfigTOML) to the head, or (nil, nil)
// when the key is absent there. A block outside that window fails with an error matching
// ErrOutsideWindow whose message names the window. It runs in parallel with commits and
// never sees a mix of two blocks. The key must not be nil and is at most KeyMax bytes.
func (db *DB) GetAt(block uint64, trie Trie, key []byte) ([]byte, error) {
	h, err := db.use("get at")
	if err != nil {
		return nil, err
	}
	if err := checkKey("get at", key); err != nil {
		return nil, err
	}
	if trie.storage {
		return cGetAt(h, block, &trie.account, key)
	}
	return cGetAt(h, block, nil, key)
}

// Commit applies changes as the next block and returns its head. Keys must not be nil
// and are at most KeyMax bytes; values are at most ValueMax bytes. The changes are
// checked before anything is written: one bad change fails the whole commit.
func (db *DB) Commit(changes []Change) (Head, error) {
	h, err := db.use("commit")
	if err != nil {
		return Head{}, err
	}
	enc, err := encodeChanges(changes)
	if err != nil {
		return Head{}, err
	}
	if testHookCall != nil {
		testHookCall("commit")
	}
	return cCommit(h, enc)
}

// Root returns the head: the newest block's number and state root.
func (db *DB) Root() (Head, error) {
	h, err := db.use("root")
	if err != nil {
		return Head{}, err
	}
	return cRoot(h)
}

// TrieRoot returns the root of trie at the head (the empty-trie root for a storage trie
// without keys): what an account's storage_root must hold for a checkpoint to verify it.
func (db *DB) TrieRoot(trie Trie) ([32]byte, error) {
	h, err := db.use("trie root")
	if err != nil {
		return [32]byte{}, err
	}
	if trie.storage {
		return cTrieRoot(h, &trie.account)
	}
	return cTrieRoot(h, nil)
}

// Prove returns the Merkle proof of key in the main trie at the head: the trie nodes
// from the root down, proving the key's value or its absence (see VerifyProof).
func (db *DB) Prove(key []byte) ([][]byte, error) {
	h, err := db.use("prove")
	if err != nil {
		return nil, err
	}
	if err := checkKey("prove", key); err != nil {
		return nil, err
	}
	enc, err := cProve(h, key)
	if err != nil {
		return nil, err
	}
	return decodeProof(enc)
}

// ProveAt returns the Merkle proof of key in the main trie at a recent block (the window
// of GetAt) and that block's head, whose Root the proof verifies against with
// VerifyProof. A block outside the window fails with an error matching ErrOutsideWindow.
func (db *DB) ProveAt(block uint64, key []byte) ([][]byte, Head, error) {
	h, err := db.use("prove at")
	if err != nil {
		return nil, Head{}, err
	}
	if err := checkKey("prove at", key); err != nil {
		return nil, Head{}, err
	}
	enc, head, err := cProveAt(h, block, key)
	if err != nil {
		return nil, Head{}, err
	}
	proof, err := decodeProof(enc)
	if err != nil {
		return nil, Head{}, err
	}
	return proof, head, nil
}

// VerifyProof checks proof (as Prove or ProveAt returns it, or an eth_getProof accountProof) for
// key against a state root, without a database. It returns the proven value, or (nil,
// nil) when the proof shows the key absent. A proof that does not verify fails with an
// error matching both ErrInvalidProof and ErrInvalidArgument.
func VerifyProof(root [32]byte, key []byte, proof [][]byte) ([]byte, error) {
	if err := checkKey("verify proof", key); err != nil {
		return nil, err
	}
	enc, err := encodeProof(proof)
	if err != nil {
		return nil, err
	}
	v, err := cVerifyProof("", &root, key, enc)
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrInvalidArgument {
		e.also = append(e.also, ErrInvalidProof)
	}
	return v, err
}

// VerifyProofIn is VerifyProof in the trie layout layout (LayoutEthereum,
// LayoutSubstrateV0 or LayoutSubstrateV1): what DB.Layout returns for the database that
// made the proof. A proof checked in another layout than its own does not verify.
func VerifyProofIn(layout string, root [32]byte, key []byte, proof [][]byte) ([]byte, error) {
	if err := checkKey("verify proof", key); err != nil {
		return nil, err
	}
	enc, err := encodeProof(proof)
	if err != nil {
		return nil, err
	}
	if err := checkLayout("verify proof", layout); err != nil {
		return nil, err
	}
	v, err := cVerifyProof(layout, &root, key, enc)
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrInvalidArgument {
		e.also = append(e.also, ErrInvalidProof)
	}
	return v, err
}

// Layout returns the trie layout the database recorded at its creation
// (LayoutEthereum, LayoutSubstrateV0 or LayoutSubstrateV1).
func (db *DB) Layout() (string, error) {
	h, err := db.use("layout")
	if err != nil {
		return "", err
	}
	return cLayout(h)
}

// CreateCheckpoint writes a checkpoint of the database's head (persisted first) into
// directory dir (created if absent; chunks already there are kept) and returns the
// checkpoint's manifest id. Restore it with Restore, or with `arbor checkpoint restore
// --block N --root 0x… --source DIR`, using the head from Root. Cancelling ctx stops it
// (an error matching ErrCancelled and ctx.Err(); no manifest is written); Close waits
// for it.
func (db *DB) CreateCheckpoint(ctx context.Context, dir string) ([32]byte, error) {
	h, err := db.use("create checkpoint")
	if err != nil {
		return [32]byte{}, err
	}
	if err := checkPath("create checkpoint", "dir", dir); err != nil {
		return [32]byte{}, err
	}
	if err := ctx.Err(); err != nil {
		return [32]byte{}, cancelled("create checkpoint", err)
	}
	if testHookCall != nil {
		testHookCall("create checkpoint")
	}
	token, release := cancelToken(ctx)
	defer release()
	id, err := cCheckpointCreate(h, dir, 0, token)
	return id, withCtx(ctx, err)
}

// cancelToken makes a Rust cancellation token that ctx's cancellation sets (0, nothing to
// release, when ctx cannot be cancelled); release stops watching and frees it.
func cancelToken(ctx context.Context) (uint64, func()) {
	done := ctx.Done()
	if done == nil {
		return 0, func() {}
	}
	token := cCancelNew()
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-done:
			_ = cCancel(token)
		case <-stop:
		}
	}()
	return token, func() {
		close(stop)
		<-watched
		_ = cCancelFree(token)
	}
}

// withCtx makes a cancellation error also match ctx's error.
func withCtx(ctx context.Context, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrCancelled && ctx.Err() != nil {
		e.also = append(e.also, ctx.Err())
	}
	return err
}

func cancelled(op string, ctxErr error) *Error {
	return &Error{Op: op, Kind: ErrCancelled, Message: ctxErr.Error(), also: []error{ctxErr}}
}

// Restore restores the checkpoint of (block, root) from sources into the database
// directory dir (new, or a restore that was interrupted: it resumes) and closes it;
// open it with Open afterwards. A source is a checkpoint directory, an http:// address
// or an s3://bucket[/prefix] (credentials from the AWS_* environment variables). Every
// chunk is verified against root before it is written.
//
// Cancelling ctx stops the restore: Restore then returns an error matching both
// ErrCancelled and ctx.Err(), and the next Restore into dir resumes it. When no source
// offers a checkpoint of (block, root), or none can be reached, the error matches ErrIO;
// a checkpoint that fails verification matches ErrCorrupt.
func Restore(ctx context.Context, dir string, block uint64, root [32]byte, sources []string, opts ...Option) error {
	if err := checkPath("restore", "dir", dir); err != nil {
		return err
	}
	o, err := collect("restore", opts)
	if err != nil {
		return err
	}
	if len(sources) == 0 {
		return invalid("restore", "no sources")
	}
	for i, s := range sources {
		if s == "" || strings.ContainsAny(s, "\n\x00") || !utf8.ValidString(s) {
			return invalid("restore", fmt.Sprintf("source %d (%q) is empty, not UTF-8, or holds a newline or NUL", i, s))
		}
	}
	list := strings.Join(sources, "\n")
	if len(list) > configMax {
		return invalid("restore", fmt.Sprintf("sources: %d bytes exceed the %d-byte limit", len(list), configMax))
	}
	if err := ctx.Err(); err != nil {
		return cancelled("restore", err)
	}
	token, release := cancelToken(ctx)
	defer release()
	return withCtx(ctx, cRestore(dir, o.config, block, &root, list, token))
}

// Close closes the database, waiting for the calls in flight (Rust refuses new calls at
// once) until ctx's deadline, or for DefaultCloseTimeout when ctx has none; a ctx that
// is already done waits for nothing. Past the deadline, Close returns an error matching
// ErrClosed (and ctx.Err() when ctx expired); the database then closes when the last
// call ends. Closing a closed DB fails with ErrClosed. After Close, every method fails
// with ErrClosed.
func (db *DB) Close(ctx context.Context) error {
	if db == nil || !db.closed.CompareAndSwap(false, true) {
		return closedError("close")
	}
	timeout := DefaultCloseTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	var ms uint64
	if timeout > 0 && ctx.Err() == nil {
		ms = uint64((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	err := cClose(db.handle, ms)
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrClosed && ctx.Err() != nil {
		e.also = append(e.also, ctx.Err())
	}
	return err
}
