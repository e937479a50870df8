package arbor

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// valueAt is what commitBlocks writes to key "k" in block b.
func valueAt(b uint64) []byte { return []byte(fmt.Sprintf("value of block %d", b)) }

// commitBlocks commits blocks 1..=n, each setting key "k" (and an account's slot) to
// values of its own among 200 fixed keys; it returns the heads, index = block number.
func commitBlocks(t testing.TB, db *DB, n uint64) []Head {
	t.Helper()
	heads := []Head{{}}
	var err error
	if heads[0], err = db.Root(); err != nil {
		t.Fatal(err)
	}
	account := [32]byte{9}
	for b := uint64(1); b <= n; b++ {
		changes := append(bigChanges(5, 0, 200),
			Change{Key: []byte("k"), Value: valueAt(b)},
			Change{Trie: StorageTrie(account), Key: []byte("slot"), Value: valueAt(b)})
		heads = append(heads, mustCommit(t, db, changes))
	}
	return heads
}

func TestGetAtAndProveAt(t *testing.T) {
	db, _ := openTemp(t)
	heads := commitBlocks(t, db, 4)
	account := [32]byte{9}
	for b := uint64(1); b <= 4; b++ {
		for trie, key := range map[Trie]string{MainTrie: "k", StorageTrie(account): "slot"} {
			v, err := db.GetAt(b, trie, []byte(key))
			if err != nil || !bytes.Equal(v, valueAt(b)) {
				t.Fatalf("GetAt(%d, %v, %s) = %q, %v; want %q", b, trie, key, v, err, valueAt(b))
			}
		}
	}
	// Block 0 is empty: absent is (nil, nil), as Get has it.
	if v, err := db.GetAt(0, MainTrie, []byte("k")); v != nil || err != nil {
		t.Fatalf("GetAt(0) = %q, %v; want nil, nil", v, err)
	}

	proof, head, err := db.ProveAt(2, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	if head != heads[2] {
		t.Fatalf("ProveAt(2) head %v, want %v", head, heads[2])
	}
	if v, err := VerifyProof(head.Root, []byte("k"), proof); err != nil || !bytes.Equal(v, valueAt(2)) {
		t.Fatalf("VerifyProof of block 2's proof = %q, %v; want %q", v, err, valueAt(2))
	}
	_, err = VerifyProof(heads[4].Root, []byte("k"), proof)
	wantKind(t, "block 2's proof against the head's root", err, ErrInvalidProof)
	// At the head, ProveAt proves what Prove does.
	atHead, head, err := db.ProveAt(4, []byte("k"))
	if err != nil || head != heads[4] {
		t.Fatalf("ProveAt(4) head %v, %v", head, err)
	}
	if p, err := db.Prove([]byte("k")); err != nil || fmt.Sprint(p) != fmt.Sprint(atHead) {
		t.Fatalf("ProveAt(head) differs from Prove: %v", err)
	}
}

func TestOutsideTheWindow(t *testing.T) {
	db, _ := openTemp(t, WithConfigTOML("[history]\nrecent_blocks = 2\n"))
	commitBlocks(t, db, 5)
	for _, block := range []uint64{0, 2, 6, 1 << 63, ^uint64(0)} {
		_, err := db.GetAt(block, MainTrie, []byte("k"))
		wantKind(t, fmt.Sprintf("GetAt(%d)", block), err, ErrOutsideWindow)
		if !strings.Contains(err.Error(), "blocks 3 to 5") {
			t.Fatalf("GetAt(%d): %v does not name the window", block, err)
		}
		_, _, err = db.ProveAt(block, []byte("k"))
		wantKind(t, fmt.Sprintf("ProveAt(%d)", block), err, ErrOutsideWindow)
	}
	if _, err := db.GetAt(3, MainTrie, []byte("k")); err != nil {
		t.Fatalf("GetAt(3), the window's oldest block: %v", err)
	}
	// Bad input is still bad input, in Go and in Rust.
	long := bytes.Repeat([]byte{'k'}, KeyMax+1)
	_, err := db.GetAt(4, MainTrie, nil)
	wantKind(t, "GetAt nil key", err, ErrInvalidArgument)
	_, _, err = db.ProveAt(4, long)
	wantKind(t, "ProveAt 128-byte key", err, ErrInvalidArgument)
	_, err = cGetAt(db.handle, 4, nil, long)
	wantKind(t, "Rust GetAt 128-byte key", err, ErrInvalidArgument)
	_, _, err = cProveAt(db.handle, 4, long)
	wantKind(t, "Rust ProveAt 128-byte key", err, ErrInvalidArgument)
	if err := db.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = db.GetAt(4, MainTrie, []byte("k"))
	wantKind(t, "GetAt after Close", err, ErrClosed)
	_, _, err = db.ProveAt(4, []byte("k"))
	wantKind(t, "ProveAt after Close", err, ErrClosed)
}

// Readers at recent blocks while blocks commit: every read sees its block's value, and
// every proof verifies against its block's root.
func TestReadsAtRecentBlocksDuringCommits(t *testing.T) {
	db, _ := openTemp(t)
	commitBlocks(t, db, 1)
	const blocks = 40
	var head, reads atomic.Uint64
	head.Store(1)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r uint64) {
			defer wg.Done()
			for i := uint64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				h := head.Load()
				b := h - min(h-1, (i*7+r)%10)
				if err := checkBlock(db, b); err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		}(uint64(r))
	}
	for b := uint64(2); b <= blocks; b++ {
		mustCommit(t, db, []Change{{Key: []byte("k"), Value: valueAt(b)}})
		head.Store(b)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Fatal("no read ran during the commits")
	}
}

// checkBlock reads and proves key "k" at block b.
func checkBlock(db *DB, b uint64) error {
	v, err := db.GetAt(b, MainTrie, []byte("k"))
	if err != nil || !bytes.Equal(v, valueAt(b)) {
		return fmt.Errorf("GetAt(%d) = %q, %v; want %q", b, v, err, valueAt(b))
	}
	proof, head, err := db.ProveAt(b, []byte("k"))
	if err != nil || head.Number != b {
		return fmt.Errorf("ProveAt(%d) = head %v, %v", b, head, err)
	}
	v, err = VerifyProof(head.Root, []byte("k"), proof)
	if err != nil || !bytes.Equal(v, valueAt(b)) {
		return fmt.Errorf("VerifyProof at block %d = %q, %v", b, v, err)
	}
	return nil
}
