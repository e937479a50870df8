package arbor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// emptyRoot is the root of the empty trie: keccak256(rlp("")).
var emptyRoot = [32]byte{
	0x56, 0xe8, 0x1f, 0x17, 0x1b, 0xcc, 0x55, 0xa6, 0xff, 0x83, 0x45, 0xe6, 0x92, 0xc0, 0xf8, 0x6e,
	0x5b, 0x48, 0xe0, 0x1b, 0x99, 0x6c, 0xad, 0xc0, 0x01, 0x62, 0x2f, 0xb5, 0xe3, 0x63, 0xb4, 0x21,
}

func TestCommitGetRoot(t *testing.T) {
	db, dir := openTemp(t)

	head, err := db.Root()
	if err != nil {
		t.Fatal(err)
	}
	if head.Number != 0 || head.Root != emptyRoot {
		t.Fatalf("fresh head = %v, want 0 %s", head, hexRoot(emptyRoot))
	}

	acct := [32]byte{1, 2, 3}
	other := [32]byte{9}
	h1 := mustCommit(t, db, []Change{
		{Trie: MainTrie, Key: []byte("alpha"), Value: []byte("one")},
		{Trie: MainTrie, Key: []byte("beta"), Value: []byte("two")},
		{Trie: StorageTrie(acct), Key: []byte("alpha"), Value: []byte("slot")},
		{Trie: MainTrie, Key: []byte{}, Value: []byte("empty key")},
	})
	if h1.Number != 1 || h1.Root == emptyRoot {
		t.Fatalf("head after the first commit = %v", h1)
	}
	if got, err := db.Root(); err != nil || got != h1 {
		t.Fatalf("Root() = %v, %v; want %v", got, err, h1)
	}

	for _, c := range []struct {
		trie Trie
		key  string
		want []byte
	}{
		{MainTrie, "alpha", []byte("one")},
		{MainTrie, "beta", []byte("two")},
		{MainTrie, "", []byte("empty key")},
		{MainTrie, "gamma", nil},
		{StorageTrie(acct), "alpha", []byte("slot")},
		{StorageTrie(acct), "beta", nil},
		{StorageTrie(other), "alpha", nil},
	} {
		got := mustGet(t, db, c.trie, []byte(c.key))
		if !bytes.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("Get(%v, %q) = %q, want %q", c.trie, c.key, got, c.want)
		}
	}

	// Update, delete (nil and empty values) and a later change of the same key winning.
	h2 := mustCommit(t, db, []Change{
		{Trie: MainTrie, Key: []byte("alpha"), Value: []byte("uno")},
		{Trie: MainTrie, Key: []byte("beta"), Value: nil},
		{Trie: StorageTrie(acct), Key: []byte("alpha"), Value: []byte{}},
		{Trie: MainTrie, Key: []byte("delta"), Value: []byte("first")},
		{Trie: MainTrie, Key: []byte("delta"), Value: []byte("last")},
	})
	if h2.Number != 2 || h2.Root == h1.Root {
		t.Fatalf("head after the second commit = %v (first %v)", h2, h1)
	}
	for _, c := range []struct {
		trie Trie
		key  string
		want []byte
	}{
		{MainTrie, "alpha", []byte("uno")},
		{MainTrie, "beta", nil},
		{MainTrie, "delta", []byte("last")},
		{StorageTrie(acct), "alpha", nil},
	} {
		if got := mustGet(t, db, c.trie, []byte(c.key)); !bytes.Equal(got, c.want) {
			t.Errorf("after delete: Get(%v, %q) = %q, want %q", c.trie, c.key, got, c.want)
		}
	}

	// Deleting what the first commit added restores its root; deleting an absent key
	// changes nothing but the block number.
	h3 := mustCommit(t, db, []Change{
		{Trie: MainTrie, Key: []byte("alpha"), Value: []byte("one")},
		{Trie: MainTrie, Key: []byte("beta"), Value: []byte("two")},
		{Trie: StorageTrie(acct), Key: []byte("alpha"), Value: []byte("slot")},
		{Trie: MainTrie, Key: []byte("delta")},
		{Trie: MainTrie, Key: []byte("never there")},
	})
	if h3.Number != 3 || h3.Root != h1.Root {
		t.Fatalf("head after undoing = %v, want block 3 with root %s", h3, hexRoot(h1.Root))
	}

	// The head and the data survive a reopen.
	if err := db.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	db2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close(context.Background())
	if got, err := db2.Root(); err != nil || got != h3 {
		t.Fatalf("Root() after reopen = %v, %v; want %v", got, err, h3)
	}
	if got := mustGet(t, db2, StorageTrie(acct), []byte("alpha")); string(got) != "slot" {
		t.Fatalf("storage value after reopen = %q", got)
	}
}

func TestEmptyCommitAddsABlock(t *testing.T) {
	db, _ := openTemp(t)
	h1 := mustCommit(t, db, []Change{{Key: []byte("k"), Value: []byte("v")}})
	h2 := mustCommit(t, db, nil)
	if h2.Number != h1.Number+1 || h2.Root != h1.Root {
		t.Fatalf("empty commit: %v after %v", h2, h1)
	}
}

func TestRootMatchesCLIVerify(t *testing.T) {
	arborBin(t) // skip early when the CLI is missing
	db, dir := openTemp(t, WithConfigTOML("[cache]\nnode_cache_bytes = 1048576\n[layers]\npersist_blocks = 2\n"))
	var head Head
	for block := range 5 {
		changes := bigChanges(7, block*200, 200)
		for i := range 20 {
			acct := [32]byte{byte(block), byte(i)}
			changes = append(changes, Change{Trie: StorageTrie(acct), Key: key32(8, uint64(i)), Value: []byte{byte(block + 1)}})
		}
		if block > 0 {
			changes = append(changes, Change{Key: key32(7, uint64(block))}) // a delete
		}
		head = mustCommit(t, db, changes)
	}
	if err := db.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := cliVerify(t, dir), head.String(); got != want {
		t.Fatalf("arbor verify prints %q, Go's head is %q", got, want)
	}
}

func TestProveAndVerify(t *testing.T) {
	db, _ := openTemp(t)
	changes := bigChanges(3, 0, 500)
	head := mustCommit(t, db, changes)

	for _, c := range changes[:50] {
		proof, err := db.Prove(c.Key)
		if err != nil {
			t.Fatal(err)
		}
		if len(proof) == 0 {
			t.Fatal("empty proof of a present key")
		}
		v, err := VerifyProof(head.Root, c.Key, proof)
		if err != nil {
			t.Fatalf("VerifyProof of a present key: %v", err)
		}
		if !bytes.Equal(v, c.Value) {
			t.Fatalf("VerifyProof = %x, want %x", v, c.Value)
		}
	}

	// Absence.
	absent := key32(99, 1)
	proof, err := db.Prove(absent)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := VerifyProof(head.Root, absent, proof); err != nil || v != nil {
		t.Fatalf("VerifyProof of an absent key = %x, %v; want nil, nil", v, err)
	}

	// Tampering: a flipped byte in any node, a dropped node, another root, another key.
	key := changes[7].Key
	proof, err = db.Prove(key)
	if err != nil {
		t.Fatal(err)
	}
	for i := range proof {
		bad := cloneProof(proof)
		bad[i][len(bad[i])/2] ^= 0x01
		v, err := VerifyProof(head.Root, key, bad)
		if err == nil && bytes.Equal(v, changes[7].Value) {
			t.Fatalf("a proof with node %d tampered verifies", i)
		}
		if err != nil {
			wantKind(t, "tampered proof", err, ErrInvalidArgument)
			wantKind(t, "tampered proof", err, ErrInvalidProof)
		}
	}
	_, err = VerifyProof(head.Root, key, cloneProof(proof)[:len(proof)-1])
	wantKind(t, "truncated proof", err, ErrInvalidProof)
	wrong := head.Root
	wrong[0] ^= 0xff
	_, err = VerifyProof(wrong, key, proof)
	wantKind(t, "proof against another root", err, ErrInvalidProof)
	_, err = VerifyProof(head.Root, key, nil)
	wantKind(t, "no proof", err, ErrInvalidProof)
}

func cloneProof(p [][]byte) [][]byte {
	out := make([][]byte, len(p))
	for i, n := range p {
		out[i] = bytes.Clone(n)
	}
	return out
}

func TestBadInput(t *testing.T) {
	db, dir := openTemp(t)
	long := bytes.Repeat([]byte{'k'}, KeyMax+1)
	huge := make([]byte, ValueMax+1)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"Get nil key", func() error { _, err := db.Get(MainTrie, nil); return err }()},
		{"Get 128-byte key", func() error { _, err := db.Get(MainTrie, long); return err }()},
		{"Get storage 128-byte key", func() error { _, err := db.Get(StorageTrie([32]byte{1}), long); return err }()},
		{"Commit nil key", func() error { _, err := db.Commit([]Change{{Key: nil, Value: []byte("v")}}); return err }()},
		{"Commit 128-byte key", func() error { _, err := db.Commit([]Change{{Key: long, Value: []byte("v")}}); return err }()},
		{"Commit oversized value", func() error { _, err := db.Commit([]Change{{Key: []byte("k"), Value: huge}}); return err }()},
		{"Prove nil key", func() error { _, err := db.Prove(nil); return err }()},
		{"Prove 128-byte key", func() error { _, err := db.Prove(long); return err }()},
		{"VerifyProof nil key", func() error { _, err := VerifyProof(emptyRoot, nil, nil); return err }()},
		{"VerifyProof 128-byte key", func() error { _, err := VerifyProof(emptyRoot, long, nil); return err }()},
		{"Open empty dir", func() error { _, err := Open(""); return err }()},
		{"Open bad TOML", func() error {
			_, err := Open(filepath.Join(t.TempDir(), "x"), WithConfigTOML("this is = = not toml"))
			return err
		}()},
		{"Open unknown key", func() error {
			_, err := Open(filepath.Join(t.TempDir(), "x"), WithConfigTOML("no_such_option = 1\n"))
			return err
		}()},
		{"Open config out of range", func() error {
			_, err := Open(filepath.Join(t.TempDir(), "x"), WithConfigTOML("[layers]\nhistory_depth = 0\n"))
			return err
		}()},
		{"Open non-UTF-8 TOML", func() error {
			_, err := Open(filepath.Join(t.TempDir(), "x"), WithConfigTOML("a = \"\xff\""))
			return err
		}()},
		{"CreateCheckpoint empty dir", func() error { _, err := db.CreateCheckpoint(context.Background(), ""); return err }()},
		{"Restore empty dir", func() error {
			return Restore(context.Background(), "", 1, emptyRoot, []string{dir})
		}()},
		{"Restore no sources", func() error {
			return Restore(context.Background(), filepath.Join(t.TempDir(), "r"), 1, emptyRoot, nil)
		}()},
		{"Restore source with a newline", func() error {
			return Restore(context.Background(), filepath.Join(t.TempDir(), "r"), 1, emptyRoot, []string{"a\nb"})
		}()},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !errors.Is(c.err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", c.name, c.err)
		}
	}
	// Nothing bad was committed.
	if h, err := db.Root(); err != nil || h.Number != 0 {
		t.Fatalf("Root() after bad input = %v, %v", h, err)
	}
	// The limits themselves are accepted.
	longest := bytes.Repeat([]byte{'k'}, KeyMax)
	h := mustCommit(t, db, []Change{{Key: longest, Value: make([]byte, ValueMax)}})
	if v := mustGet(t, db, MainTrie, longest); len(v) != ValueMax || h.Number != 1 {
		t.Fatalf("a %d-byte value read back as %d bytes", ValueMax, len(v))
	}
}

// Rust checks again what Go checks: bypass Go's checks through the unexported calls.
func TestRustRejectsBadInputToo(t *testing.T) {
	db, _ := openTemp(t)
	long := bytes.Repeat([]byte{'k'}, KeyMax+1)
	_, err := cGet(db.handle, nil, long)
	wantKind(t, "Rust Get 128-byte key", err, ErrInvalidArgument)
	_, err = cProve(db.handle, long)
	wantKind(t, "Rust Prove 128-byte key", err, ErrInvalidArgument)
	_, err = cOpen("", "")
	wantKind(t, "Rust Open empty path", err, ErrInvalidArgument)
	_, err = cOpen(filepath.Join(t.TempDir(), "x"), "= nonsense")
	wantKind(t, "Rust Open bad TOML", err, ErrInvalidArgument)
	for name, enc := range map[string][]byte{
		"truncated":        {0, 0, 0, 1, 0},
		"trailing bytes":   {0, 0, 0, 0, 7},
		"bad op":           {0, 0, 0, 1, 0, 0, 1, 'k', 9},
		"bad account len":  {0, 0, 0, 1, 5, 1, 2, 3, 4, 5, 0, 1, 'k', 0},
		"empty set value":  {0, 0, 0, 1, 0, 0, 1, 'k', 1, 0, 0, 0, 0},
		"128-byte key len": {0, 0, 0, 1, 0, 0, 128},
		"no count":         {0, 0},
	} {
		_, err := cCommit(db.handle, enc)
		wantKind(t, "Rust Commit "+name, err, ErrInvalidArgument)
	}
	root := emptyRoot
	_, err = cVerifyProof("", &root, []byte("k"), []byte{0, 0, 0, 2, 0, 0, 0, 1})
	wantKind(t, "Rust VerifyProof malformed encoding", err, ErrInvalidArgument)
	if h, err := db.Root(); err != nil || h.Number != 0 {
		t.Fatalf("Root() after bad input = %v, %v", h, err)
	}
}

func TestUseAfterCloseAndDoubleClose(t *testing.T) {
	db, _ := openTemp(t)
	mustCommit(t, db, []Change{{Key: []byte("k"), Value: []byte("v")}})
	if err := db.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "second Close", db.Close(context.Background()), ErrClosed)
	_, err := db.Get(MainTrie, []byte("k"))
	wantKind(t, "Get after Close", err, ErrClosed)
	_, err = db.Commit([]Change{{Key: []byte("k"), Value: []byte("w")}})
	wantKind(t, "Commit after Close", err, ErrClosed)
	_, err = db.Root()
	wantKind(t, "Root after Close", err, ErrClosed)
	_, err = db.Prove([]byte("k"))
	wantKind(t, "Prove after Close", err, ErrClosed)
	_, err = db.CreateCheckpoint(context.Background(), t.TempDir())
	wantKind(t, "CreateCheckpoint after Close", err, ErrClosed)
	var nilDB *DB
	_, err = nilDB.Root()
	wantKind(t, "Root of a nil *DB", err, ErrClosed)

	// Rust re-checks: its handle is closed too.
	_, err = cRoot(db.handle)
	wantKind(t, "Rust Root after Close", err, ErrClosed)
	_, err = cGet(db.handle, nil, []byte("k"))
	wantKind(t, "Rust Get after Close", err, ErrClosed)
	_, err = cCommit(db.handle, []byte{0, 0, 0, 0})
	wantKind(t, "Rust Commit after Close", err, ErrClosed)
	wantKind(t, "Rust Close after Close", cClose(db.handle, 0), ErrClosed)
	wantKind(t, "Rust Root of handle 0", func() error { _, err := cRoot(0); return err }(), ErrClosed)
	wantKind(t, "Rust Root of a forged handle", func() error { _, err := cRoot(1<<40 | 7); return err }(), ErrClosed)
}

func TestStaleHandleAfterReopen(t *testing.T) {
	checkLeaks(t)
	dir := filepath.Join(t.TempDir(), "db")
	db1, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustCommit(t, db1, []Change{{Key: []byte("k"), Value: []byte("v1")}})
	if err := db1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	db2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close(context.Background())
	if db1.handle == db2.handle {
		t.Fatalf("reopen reused handle %#x", db1.handle)
	}
	// Go refuses the old DB; Rust refuses its handle, although a database is open in the
	// same slot (and directory) now.
	_, err = db1.Get(MainTrie, []byte("k"))
	wantKind(t, "Get on the closed DB", err, ErrClosed)
	_, err = cGet(db1.handle, nil, []byte("k"))
	wantKind(t, "Rust Get with the stale handle", err, ErrClosed)
	_, err = cCommit(db1.handle, []byte{0, 0, 0, 0})
	wantKind(t, "Rust Commit with the stale handle", err, ErrClosed)
	wantKind(t, "Rust Close with the stale handle", cClose(db1.handle, 0), ErrClosed)
	// The new DB is untouched.
	if v := mustGet(t, db2, MainTrie, []byte("k")); string(v) != "v1" {
		t.Fatalf("Get on the reopened DB = %q", v)
	}
	h := mustCommit(t, db2, []Change{{Key: []byte("k"), Value: []byte("v2")}})
	if h.Number != 2 {
		t.Fatalf("head after reopen = %v", h)
	}
}

func TestOpenLockedDirectory(t *testing.T) {
	_, dir := openTemp(t)
	_, err := Open(dir)
	if err == nil {
		t.Fatal("a second Open of an open directory succeeded")
	}
	wantKind(t, "second Open", err, ErrIO)
	// Other spellings of the same directory are the same database.
	link := dir + ".link"
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(link)
	for _, alias := range []string{dir + "/", dir + "/.", link} {
		_, err := Open(alias)
		if err == nil {
			t.Fatalf("Open(%q) of an open directory succeeded", alias)
		}
		wantKind(t, "Open "+alias, err, ErrIO)
	}
}

func TestGarbageDirectoryIsCorrupt(t *testing.T) {
	checkLeaks(t)
	for _, c := range []struct {
		name  string
		files map[string]string
	}{
		{"junk CURRENT", map[string]string{"CURRENT": "this is not a manifest name\n"}},
		{"empty CURRENT", map[string]string{"CURRENT": ""}},
		{"junk MANIFEST", map[string]string{"CURRENT": "MANIFEST-000001\n", "MANIFEST-000001": strings.Repeat("garbage!", 100)}},
		{"random files", map[string]string{"notes.txt": "hello", "000007.sst": "\x00\x01not a table", "LOCK": ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for f, content := range c.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			db, err := Open(dir)
			if err == nil {
				db.Close(context.Background())
				t.Fatalf("Open of a directory with %s succeeded", c.name)
			}
			wantKind(t, "Open "+c.name, err, ErrCorrupt)
			// The directory is left as it was.
			for f, content := range c.files {
				if got, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(got) != content {
					t.Fatalf("%s changed: %q, %v", f, got, err)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != len(c.files) {
				t.Fatalf("Open added files to %s: %d entries", dir, len(entries))
			}
			if entries, _ := os.ReadDir(filepath.Dir(dir)); len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Logf("ABI: a failed Open left %v beside the directory", names)
			}
		})
	}
}

func TestDebugPanic(t *testing.T) {
	checkLeaks(t)
	db, _ := openTemp(t)
	for range 3 {
		err := debugPanic()
		if errors.Is(err, ErrInvalidArgument) && strings.Contains(err.Error(), "debug builds only") {
			t.Skip("the library is a release build: arbor_debug_panic panics in debug builds only")
		}
		wantKind(t, "arbor_debug_panic", err, ErrPanic)
		if !strings.Contains(err.Error(), "arbor_debug_panic called") {
			t.Fatalf("panic message lost: %v", err)
		}
	}
	// The process and the library are fine.
	h := mustCommit(t, db, []Change{{Key: []byte("after"), Value: []byte("panic")}})
	if h.Number != 1 {
		t.Fatalf("head after the panics = %v", h)
	}
}

func TestErrorFormat(t *testing.T) {
	checkLeaks(t)
	_, err := Open("")
	if got, want := err.Error(), "arbor: open: dir is empty (invalid argument)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Op != "open" || e.Kind != ErrInvalidArgument {
		t.Fatalf("error %#v", err)
	}
	for _, s := range []error{ErrInvalidArgument, ErrCorrupt, ErrIO, ErrClosed, ErrCancelled, ErrPanic, ErrInvalidProof, ErrOutsideWindow} {
		if !strings.HasPrefix(s.Error(), "arbor: ") || errors.Is(err, s) != (s == ErrInvalidArgument) {
			t.Errorf("sentinel %v", s)
		}
	}
	if got := fmt.Sprint(StorageTrie([32]byte{0xab})); !strings.HasPrefix(got, "storage(0xab00") {
		t.Errorf("Trie.String() = %q", got)
	}
	if got := MainTrie.String(); got != "main" {
		t.Errorf("MainTrie.String() = %q", got)
	}
}

func TestTrieRoot(t *testing.T) {
	checkLeaks(t)
	db, err := Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	var account [32]byte
	account[0] = 7
	head, err := db.Commit([]Change{
		{Trie: MainTrie, Key: []byte("k"), Value: []byte("v")},
		{Trie: StorageTrie(account), Key: []byte("slot"), Value: []byte("x")},
	})
	if err != nil {
		t.Fatal(err)
	}
	main, err := db.TrieRoot(MainTrie)
	if err != nil || main != head.Root {
		t.Fatalf("main trie root %x, %v; head %x", main, err, head.Root)
	}
	storage, err := db.TrieRoot(StorageTrie(account))
	if err != nil || storage == head.Root || storage == ([32]byte{}) {
		t.Fatalf("storage trie root %x, %v", storage, err)
	}
	var other [32]byte
	other[0] = 8
	empty, err := db.TrieRoot(StorageTrie(other))
	if err != nil || fmt.Sprintf("%x", empty) != "56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421" {
		t.Fatalf("an empty storage trie's root %x, %v", empty, err)
	}
}
