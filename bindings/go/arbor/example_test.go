package arbor_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/arbor-engine/arbor/bindings/go/arbor"
)

func Example() {
	dir, err := os.MkdirTemp("", "arbor-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := arbor.Open(filepath.Join(dir, "db"), arbor.WithConfigTOML("[cache]\nnode_cache_bytes = 8388608\n"))
	if err != nil {
		log.Fatal(err)
	}

	// Block 1: two keys of the main trie and one slot of an account's storage trie.
	account := [32]byte{0x01}
	head, err := db.Commit([]arbor.Change{
		{Trie: arbor.MainTrie, Key: []byte("apple"), Value: []byte("red")},
		{Trie: arbor.MainTrie, Key: []byte("banana"), Value: []byte("yellow")},
		{Trie: arbor.StorageTrie(account), Key: []byte("slot"), Value: []byte{0x2a}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("block", head.Number)

	// Block 2: a nil Value deletes.
	head, err = db.Commit([]arbor.Change{{Trie: arbor.MainTrie, Key: []byte("banana")}})
	if err != nil {
		log.Fatal(err)
	}
	v, _ := db.Get(arbor.MainTrie, []byte("apple"))
	gone, _ := db.Get(arbor.MainTrie, []byte("banana"))
	slot, _ := db.Get(arbor.StorageTrie(account), []byte("slot"))
	fmt.Printf("block %d: apple=%s banana=%v slot=%x\n", head.Number, v, gone, slot)

	// A proof of a key verifies against the root alone.
	proof, err := db.Prove([]byte("apple"))
	if err != nil {
		log.Fatal(err)
	}
	proven, err := arbor.VerifyProof(head.Root, []byte("apple"), proof)
	fmt.Printf("proven: %s %v\n", proven, err)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.Close(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = db.Root()
	fmt.Println(err)
	// Output:
	// block 1
	// block 2: apple=red banana=[] slot=2a
	// proven: red <nil>
	// arbor: root: the database is closed (closed)
}
