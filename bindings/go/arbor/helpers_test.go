package arbor

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureRoot != "" {
		os.RemoveAll(fixtureRoot)
	}
	if n := LiveBuffers(); n != 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "arbor: %d Rust buffers still live after all tests\n", n)
		code = 1
	}
	os.Exit(code)
}

// checkLeaks fails t when a Rust buffer is still live once t (and its cleanups
// registered later, such as closing its databases) is done.
func checkLeaks(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		if n := LiveBuffers(); n != 0 {
			t.Errorf("LiveBuffers() = %d at the end of the test, want 0", n)
		}
	})
}

// openTemp opens a new database in a fresh temporary directory; it is closed (if the
// test did not close it) when the test ends.
func openTemp(t testing.TB, opts ...Option) (*DB, string) {
	t.Helper()
	checkLeaks(t)
	dir := filepath.Join(t.TempDir(), "db")
	db, err := Open(dir, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := db.Close(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return db, dir
}

// mustCommit commits changes or fails the test.
func mustCommit(t testing.TB, db *DB, changes []Change) Head {
	t.Helper()
	head, err := db.Commit(changes)
	if err != nil {
		t.Fatalf("Commit(%d changes): %v", len(changes), err)
	}
	return head
}

// mustGet reads a key or fails the test.
func mustGet(t testing.TB, db *DB, trie Trie, key []byte) []byte {
	t.Helper()
	v, err := db.Get(trie, key)
	if err != nil {
		t.Fatalf("Get(%v, %x): %v", trie, key, err)
	}
	return v
}

// wantKind fails t unless err matches kind.
func wantKind(t testing.TB, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: error %v, want one matching %v", what, err, kind)
	}
	var e *Error
	if !errors.As(err, &e) || e.Message == "" {
		t.Fatalf("%s: error %#v is not an *Error with a message", what, err)
	}
}

func hexRoot(r [32]byte) string { return "0x" + hex.EncodeToString(r[:]) }

// arborBin returns the path of the `arbor` CLI: $ARBOR_BIN, else
// $CARGO_TARGET_DIR/debug/arbor (default target ~/.cache/arbor/target). A missing
// binary skips the test, unless CI is "true".
func arborBin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("ARBOR_BIN")
	if bin == "" {
		target := os.Getenv("CARGO_TARGET_DIR")
		if target == "" {
			home, _ := os.UserHomeDir()
			target = filepath.Join(home, ".cache", "arbor", "target")
		}
		bin = filepath.Join(target, "debug", "arbor")
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the arbor CLI is missing (%v); build it with `cargo build -p cli` or set ARBOR_BIN", err)
		}
		t.Skipf("the arbor CLI is missing (%v); build it with `cargo build -p cli` or set ARBOR_BIN", err)
	}
	return bin
}

// runArbor runs the CLI with args and returns its standard output.
func runArbor(t testing.TB, args ...string) string {
	t.Helper()
	bin := arborBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("arbor %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// cliVerify runs `arbor verify --db dir` and returns the head it prints ("ok N 0x…").
func cliVerify(t testing.TB, dir string) string {
	t.Helper()
	out := runArbor(t, "verify", "--db", dir)
	line := strings.TrimSpace(out)
	if !strings.HasPrefix(line, "ok ") {
		t.Fatalf("arbor verify --db %s: %q, want \"ok N 0x…\"", dir, out)
	}
	return strings.TrimPrefix(line, "ok ")
}

// key32 is a deterministic 32-byte key.
func key32(seed, i uint64) []byte {
	k := make([]byte, 32)
	r := rand.New(rand.NewPCG(seed, i))
	for j := 0; j < 32; j += 8 {
		binary.LittleEndian.PutUint64(k[j:], r.Uint64())
	}
	return k
}

// bigChanges is n main-trie changes with 32-byte keys and 40-byte values.
func bigChanges(seed uint64, start, n int) []Change {
	changes := make([]Change, n)
	for i := range changes {
		k := key32(seed, uint64(start+i))
		v := make([]byte, 40)
		copy(v, k)
		binary.BigEndian.PutUint64(v[32:], uint64(start+i))
		changes[i] = Change{Trie: MainTrie, Key: k, Value: v}
	}
	return changes
}

// emptyCodeHash is keccak256 of no bytes: the code hash of an account without code.
var emptyCodeHash = [32]byte{
	0xc5, 0xd2, 0x46, 0x01, 0x86, 0xf7, 0x23, 0x3c, 0x92, 0x7e, 0x7d, 0xb2, 0xdc, 0xc7, 0x03, 0xc0,
	0xe5, 0x00, 0xb6, 0x53, 0xca, 0x82, 0x27, 0x3b, 0x7b, 0xfa, 0xd8, 0x04, 0x5d, 0x85, 0xa4, 0x70,
}

// rlpString is the RLP encoding of a byte string.
func rlpString(b []byte) []byte {
	if len(b) == 1 && b[0] < 0x80 {
		return []byte{b[0]}
	}
	return append(rlpHeader(0x80, len(b)), b...)
}

// rlpList is the RLP encoding of a list of encoded items.
func rlpList(items ...[]byte) []byte {
	var payload []byte
	for _, it := range items {
		payload = append(payload, it...)
	}
	return append(rlpHeader(0xc0, len(payload)), payload...)
}

func rlpHeader(base byte, n int) []byte {
	if n < 56 {
		return []byte{base + byte(n)}
	}
	l := trimmed(binary.BigEndian.AppendUint64(nil, uint64(n)))
	return append([]byte{base + 55 + byte(len(l))}, l...)
}

// trimmed drops leading zero bytes (RLP integers).
func trimmed(b []byte) []byte {
	for len(b) > 0 && b[0] == 0 {
		b = b[1:]
	}
	return b
}

// accountRLP is an Ethereum account: RLP [nonce, balance, storage_root, code_hash], the
// value of its key in the main trie (a storage trie is checkpointed only when its
// account's storage_root commits to it).
func accountRLP(nonce uint64, balance []byte, storageRoot, codeHash [32]byte) []byte {
	return rlpList(
		rlpString(trimmed(binary.BigEndian.AppendUint64(nil, nonce))),
		rlpString(trimmed(balance)),
		rlpString(storageRoot[:]),
		rlpString(codeHash[:]),
	)
}

// rootCalc computes the root a set of pairs would have, apart from the database under
// test (a storage root must be known before the account that commits to it is written):
// the main-trie root of a scratch database holding exactly those pairs.
type rootCalc struct {
	db   *DB
	keys [][]byte // what the scratch trie holds now
}

func newRootCalc(t testing.TB) *rootCalc {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "scratch"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return &rootCalc{db: db}
}

// root returns the root of the trie holding exactly pairs.
func (r *rootCalc) root(t testing.TB, pairs []Change) [32]byte {
	t.Helper()
	changes := make([]Change, 0, len(r.keys)+len(pairs))
	for _, k := range r.keys {
		changes = append(changes, Change{Key: k})
	}
	r.keys = r.keys[:0]
	for _, p := range pairs {
		changes = append(changes, Change{Key: p.Key, Value: p.Value})
		r.keys = append(r.keys, p.Key)
	}
	return mustCommit(t, r.db, changes).Root
}
