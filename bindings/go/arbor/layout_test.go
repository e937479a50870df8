package arbor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

// The three layouts: a database records its own, proofs verify only in it, and the same
// changes give each layout its own root.
func TestLayouts(t *testing.T) {
	roots := map[string][32]byte{}
	for _, layout := range []string{LayoutEthereum, LayoutSubstrateV0, LayoutSubstrateV1} {
		t.Run(layout, func(t *testing.T) {
			db, dir := openTemp(t, WithLayout(layout))
			if got, err := db.Layout(); err != nil || got != layout {
				t.Fatalf("Layout() = %q, %v; want %q", got, err, layout)
			}
			var head Head
			for b := 0; b < 3; b++ {
				changes := []Change{
					{Key: []byte("short"), Value: []byte(fmt.Sprintf("v%d", b))},
					{Key: []byte("long"), Value: bytes.Repeat([]byte{byte(b + 1)}, 40)},
					{Key: []byte(fmt.Sprintf("k%d", b)), Value: bytes.Repeat([]byte{7}, 33)},
				}
				head = mustCommit(t, db, changes)
			}
			roots[layout] = head.Root
			for _, key := range []string{"short", "long", "k1", "absent"} {
				proof, err := db.Prove([]byte(key))
				if err != nil {
					t.Fatalf("Prove(%s): %v", key, err)
				}
				want, err := db.Get(MainTrie, []byte(key))
				if err != nil {
					t.Fatal(err)
				}
				got, err := VerifyProofIn(layout, head.Root, []byte(key), proof)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("VerifyProofIn(%s, %s) = %x, %v; want %x", layout, key, got, err, want)
				}
				// V0 and V1 encode short values alike, so the other family is the test.
				other := LayoutEthereum
				if layout == LayoutEthereum {
					other = LayoutSubstrateV1
				}
				if key != "absent" {
					if _, err := VerifyProofIn(other, head.Root, []byte(key), proof); !errors.Is(err, ErrInvalidProof) {
						t.Fatalf("a %s proof of %s verified in %s: %v", layout, key, other, err)
					}
				}
			}
			if err := db.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Reopened without a layout, it keeps its own; with another, it is refused.
			again, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := again.Layout(); got != layout {
				t.Fatalf("reopened as %q, want %q", got, layout)
			}
			if err := again.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			other := LayoutSubstrateV0
			if layout == LayoutSubstrateV0 {
				other = LayoutEthereum
			}
			wrong, err := Open(dir, WithLayout(other))
			if err == nil {
				wrong.Close(context.Background())
				t.Fatalf("a %s database opened as %s", layout, other)
			}
			wantKind(t, "opened with another layout", err, ErrInvalidArgument)
		})
	}
	if roots[LayoutEthereum] == roots[LayoutSubstrateV0] || roots[LayoutSubstrateV0] == roots[LayoutSubstrateV1] {
		t.Fatalf("layouts gave equal roots: %x", roots)
	}
}

func TestLayoutArgumentsAreChecked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := Open(dir, WithLayout("polkadot")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Open with an unknown layout: %v", err)
	}
	if _, err := Open(dir, WithLayout(LayoutSubstrateV1), WithConfigTOML("layout = \"ethereum\"\n")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Open with two layouts: %v", err)
	}
	if _, err := VerifyProofIn("polkadot", [32]byte{}, []byte("k"), nil); !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrInvalidProof) {
		t.Fatalf("VerifyProofIn with an unknown layout: %v", err)
	}
}

// A checkpoint of a Substrate database restores into a new directory in its layout.
func TestSubstrateCheckpointRestoresInItsLayout(t *testing.T) {
	db, _ := openTemp(t, WithLayout(LayoutSubstrateV1))
	var head Head
	for b := 0; b < 3; b++ {
		head = mustCommit(t, db, append(bigChanges(50, b, 400), Change{Key: []byte("long"), Value: bytes.Repeat([]byte{byte(b)}, 50)}))
	}
	cp := filepath.Join(t.TempDir(), "cp")
	if _, err := db.CreateCheckpoint(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if err := Restore(context.Background(), dir, head.Number, head.Root, []string{cp}); err != nil {
		t.Fatal(err)
	}
	restored, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close(context.Background())
	if got, _ := restored.Layout(); got != LayoutSubstrateV1 {
		t.Fatalf("restored as %q", got)
	}
	if got, err := restored.Root(); err != nil || got != head {
		t.Fatalf("restored head %v, %v; want %v", got, err, head)
	}
	proof, err := restored.Prove([]byte("long"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := VerifyProofIn(LayoutSubstrateV1, head.Root, []byte("long"), proof); err != nil || !bytes.Equal(v, bytes.Repeat([]byte{2}, 50)) {
		t.Fatalf("proof of the restored database: %x, %v", v, err)
	}
	// Into an Ethereum database it is refused.
	eth := filepath.Join(t.TempDir(), "eth")
	if err := Restore(context.Background(), eth, head.Number, head.Root, []string{cp}, WithLayout(LayoutEthereum)); err == nil {
		t.Fatal("a Substrate checkpoint restored into an Ethereum database")
	}
}
