package arbor

import (
	"bytes"
	"errors"
	"testing"
)

func TestEncodeChangesBytes(t *testing.T) {
	checkLeaks(t)
	acct := [32]byte{0: 0xa1, 31: 0xa2}
	got, err := encodeChanges([]Change{
		{Trie: MainTrie, Key: []byte("k"), Value: []byte("vv")},
		{Trie: StorageTrie(acct), Key: []byte{}, Value: nil},
		{Trie: MainTrie, Key: []byte("del"), Value: []byte{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	want = append(want, 0, 0, 0, 3) // count
	want = append(want, 0, 0, 1, 'k', 1, 0, 0, 0, 2, 'v', 'v')
	want = append(want, 32)
	want = append(want, acct[:]...)
	want = append(want, 0, 0, 0)
	want = append(want, 0, 0, 3, 'd', 'e', 'l', 0)
	if !bytes.Equal(got, want) {
		t.Fatalf("encodeChanges:\n got %x\nwant %x", got, want)
	}
	if got, _ := encodeChanges(nil); !bytes.Equal(got, []byte{0, 0, 0, 0}) {
		t.Fatalf("no changes: %x", got)
	}
	// A 300-byte value has a big-endian length.
	got, _ = encodeChanges([]Change{{Key: []byte("k"), Value: make([]byte, 300)}})
	if !bytes.Equal(got[:12], []byte{0, 0, 0, 1, 0, 0, 1, 'k', 1, 0, 0, 1}) || got[12] != 0x2c || len(got) != 13+300 {
		t.Fatalf("300-byte value: %x…", got[:16])
	}
}

func TestEncodeChangesRejects(t *testing.T) {
	checkLeaks(t)
	for name, c := range map[string]Change{
		"nil key":        {Key: nil, Value: []byte("v")},
		"nil key delete": {Key: nil},
		"long key":       {Key: make([]byte, KeyMax+1), Value: []byte("v")},
		"long value":     {Key: []byte("k"), Value: make([]byte, ValueMax+1)},
	} {
		_, err := encodeChanges([]Change{{Key: []byte("ok"), Value: []byte("v")}, c})
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestProofEncodingRoundTrip(t *testing.T) {
	checkLeaks(t)
	nodes := [][]byte{[]byte("first node"), {}, bytes.Repeat([]byte{7}, 70000)}
	enc, err := encodeProof(nodes)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc[:4], []byte{0, 0, 0, 3}) || !bytes.Equal(enc[4:8], []byte{0, 0, 0, 10}) {
		t.Fatalf("encodeProof header %x", enc[:8])
	}
	dec, err := decodeProof(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(dec) != len(nodes) {
		t.Fatalf("decoded %d nodes", len(dec))
	}
	for i := range nodes {
		if !bytes.Equal(dec[i], nodes[i]) {
			t.Fatalf("node %d differs", i)
		}
	}
	// Appending to one node must not overwrite the next.
	for i, n := range dec {
		if cap(n) != len(n) {
			t.Fatalf("node %d: capacity %d beyond its length %d", i, cap(n), len(n))
		}
	}
	for name, bad := range map[string][]byte{
		"empty":          {},
		"short count":    {0, 0, 1},
		"count too big":  {0, 0, 0, 9, 0, 0, 0, 0},
		"node too long":  {0, 0, 0, 1, 0, 0, 0, 5, 1},
		"trailing bytes": {0, 0, 0, 0, 1},
	} {
		if _, err := decodeProof(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeProof(%s): %v, want ErrCorrupt", name, err)
		}
	}
}
