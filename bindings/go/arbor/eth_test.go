package arbor

// Ethereum vectors from the repository's test data ($ARBOR_TESTDATA, default
// testdata/ethereum at the top of the clone; see its SOURCES.md): genesis allocations
// committed through Go give their known state roots, and VerifyProof accepts every
// eth_getProof response.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/crypto/sha3"
)

func keccak(b []byte) [32]byte {
	h := sha3.NewLegacyKeccak256()
	h.Write(b)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// testdata returns the Ethereum test-data directory; the repository ships it, so its
// absence fails the test.
func testdata(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARBOR_TESTDATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "testdata", "ethereum")
	}
	if _, err := os.Stat(filepath.Join(dir, "SOURCES.md")); err != nil {
		t.Fatalf("no Ethereum test data at %s (set ARBOR_TESTDATA): %v", dir, err)
	}
	return dir
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if len(s)%2 == 1 {
		s = "0" + s
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func hash32(t testing.TB, s string) [32]byte {
	t.Helper()
	b := unhex(t, s)
	if len(b) != 32 {
		t.Fatalf("%q is not 32 bytes", s)
	}
	return [32]byte(b)
}

// quantity parses an Ethereum JSON number: a 0x hex or decimal string, or a JSON number;
// absent is zero. It returns the big-endian bytes without leading zeros.
func quantity(t testing.TB, raw json.RawMessage) []byte {
	t.Helper()
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
	} else {
		s = string(raw)
	}
	n := new(big.Int)
	var ok bool
	if h, found := strings.CutPrefix(strings.ToLower(s), "0x"); found {
		_, ok = n.SetString(h, 16)
	} else {
		_, ok = n.SetString(s, 10)
	}
	if !ok || n.Sign() < 0 {
		t.Fatalf("bad quantity %s", raw)
	}
	return n.Bytes()
}

// word parses a storage key or value: hex with or without 0x, left-padded to 32 bytes.
func word(t testing.TB, s string) [32]byte {
	t.Helper()
	b := unhex(t, s)
	if len(b) > 32 {
		t.Fatalf("storage word %q exceeds 32 bytes", s)
	}
	var w [32]byte
	copy(w[32-len(b):], b)
	return w
}

type genesisAccount struct {
	Balance json.RawMessage   `json:"balance"`
	Wei     json.RawMessage   `json:"wei"`
	Nonce   json.RawMessage   `json:"nonce"`
	Code    string            `json:"code"`
	Storage map[string]string `json:"storage"`
}

// genesisChanges turns a genesis file into one commit: every account at
// keccak256(address) = RLP[nonce, balance, storage_root, code_hash], and every storage
// slot at keccak256(slot) = RLP(trimmed value) in the account's storage trie (storage
// roots computed with calc).
func genesisChanges(t *testing.T, path string, calc *rootCalc) []Change {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	allocJSON := raw
	if a, ok := top["alloc"]; ok {
		allocJSON = a
	}
	var alloc map[string]genesisAccount
	if err := json.Unmarshal(allocJSON, &alloc); err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, 0, len(alloc))
	for a := range alloc {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	var changes []Change
	for _, a := range addrs {
		acct := alloc[a]
		addr := unhex(t, a)
		if len(addr) != 20 {
			t.Fatalf("address %q is not 20 bytes", a)
		}
		key := keccak(addr)
		balance := acct.Balance
		if len(balance) == 0 {
			balance = acct.Wei
		}
		var nonce uint64
		if nb := quantity(t, acct.Nonce); len(nb) > 0 {
			nonce = new(big.Int).SetBytes(nb).Uint64()
		}
		codeHash := emptyCodeHash
		if code := unhex(t, acct.Code); len(code) > 0 {
			codeHash = keccak(code)
		}
		storageRoot := emptyRoot
		var slots []Change
		for k, v := range acct.Storage {
			value := word(t, v)
			if value == ([32]byte{}) {
				continue // a zero slot is an absent slot
			}
			slot := word(t, k)
			sk := keccak(slot[:])
			slots = append(slots, Change{Trie: StorageTrie(key), Key: sk[:], Value: rlpString(trimmed(value[:]))})
		}
		if len(slots) > 0 {
			storageRoot = calc.root(t, slots)
			changes = append(changes, slots...)
		}
		changes = append(changes, Change{Trie: MainTrie, Key: key[:], Value: accountRLP(nonce, quantity(t, balance), storageRoot, codeHash)})
	}
	return changes
}

func TestGenesisRoots(t *testing.T) {
	checkLeaks(t)
	data := testdata(t)
	calc := newRootCalc(t)
	for _, c := range []struct{ file, root string }{
		// genesis/ (SOURCES.md section 2).
		{"genesis/mainnet.json", "0xd7f8974fb5ac78d9ac099b9ad5018bedc2ce0a72dad1827a1709da30580f0544"},
		{"genesis/sepolia.json", "0x5eb6e371a698b8d68f665192350ffcecbbbf322916f4b51bd79bb6887da3f494"},
		{"genesis/holesky.json", "0x69d8c9d72f6fa4ad42d4702b433707212f90db395eb54dc20bc85de253788783"},
		{"genesis/hoodi.json", "0xda87d7f5f91c51508791bbcbd4aa5baf04917830b86985eeb9ad3d5bfb657576"},
		{"genesis/goerli.json", "0x5d6cded585e73c4e322c30c2f782a336316f17dd85a4863b9d838d2d4b8b3008"},
		{"genesis/dev.json", "0xf09d8f7da5bc5036f8dd9536c953e2212390a46fb3e553ece2b7d419131537b1"},
		// execution-apis/genesis.json: the stateRoot of eth_getBlockByNumber/get-genesis.io.
		{"execution-apis/genesis.json", "0xdc43f460541a253c0f64b6943ef83fa3bd601699a255622f088d46f7fde359fc"},
	} {
		t.Run(filepath.Base(filepath.Dir(c.file))+"/"+filepath.Base(c.file), func(t *testing.T) {
			changes := genesisChanges(t, filepath.Join(data, c.file), calc)
			db, _ := openTemp(t)
			head := mustCommit(t, db, changes)
			if got := hexRoot(head.Root); got != c.root {
				t.Fatalf("root %s, want %s (%d changes)", got, c.root, len(changes))
			}
			if r, err := db.Root(); err != nil || r != head {
				t.Fatalf("Root() = %v, %v; want %v", r, err, head)
			}
			// Every account proves against the root with its value.
			for _, ch := range changes[:min(len(changes), 50)] {
				if !ch.Trie.IsMain() {
					continue
				}
				proof, err := db.Prove(ch.Key)
				if err != nil {
					t.Fatal(err)
				}
				if v, err := VerifyProof(head.Root, ch.Key, proof); err != nil || !bytes.Equal(v, ch.Value) {
					t.Fatalf("VerifyProof(%x) = %x, %v; want %x", ch.Key, v, err, ch.Value)
				}
			}
		})
	}
}

// proofResult is an eth_getProof result.
type proofResult struct {
	Address      string   `json:"address"`
	AccountProof []string `json:"accountProof"`
	Balance      string   `json:"balance"`
	CodeHash     string   `json:"codeHash"`
	Nonce        string   `json:"nonce"`
	StorageHash  string   `json:"storageHash"`
	StorageProof []struct {
		Key   string   `json:"key"`
		Value string   `json:"value"`
		Proof []string `json:"proof"`
	} `json:"storageProof"`
}

// checkProofResult verifies an eth_getProof result against a state root: the account
// (or its absence) and every storage slot (or its absence). It returns how many proofs
// it checked.
func checkProofResult(t *testing.T, root [32]byte, r proofResult) int {
	t.Helper()
	nodes := func(p []string) [][]byte {
		out := make([][]byte, len(p))
		for i, n := range p {
			out[i] = unhex(t, n)
		}
		return out
	}
	addr := keccak(unhex(t, r.Address))
	got, err := VerifyProof(root, addr[:], nodes(r.AccountProof))
	if err != nil {
		t.Fatalf("account %s: %v", r.Address, err)
	}
	nonce := new(big.Int).SetBytes(unhex(t, r.Nonce)).Uint64()
	balance := unhex(t, r.Balance)
	storageRoot, codeHash := hash32(t, r.StorageHash), hash32(t, r.CodeHash)
	absent := nonce == 0 && len(trimmed(balance)) == 0 && codeHash == emptyCodeHash && storageRoot == emptyRoot
	switch want := accountRLP(nonce, balance, storageRoot, codeHash); {
	case got == nil && !absent:
		t.Fatalf("account %s: proven absent, the result claims %x", r.Address, want)
	case got != nil && !bytes.Equal(got, want):
		t.Fatalf("account %s: proven %x, the result claims %x", r.Address, got, want)
	}
	// A tampered account proof fails.
	if len(r.AccountProof) > 0 {
		bad := nodes(r.AccountProof)
		bad[0][len(bad[0])-3] ^= 0x10
		if _, err := VerifyProof(root, addr[:], bad); !errorIsProof(err) {
			t.Fatalf("account %s: a tampered proof gave %v", r.Address, err)
		}
	}
	checked := 1
	for _, s := range r.StorageProof {
		slot := word(t, s.Key)
		sk := keccak(slot[:])
		value := word(t, s.Value)
		got, err := VerifyProof(storageRoot, sk[:], nodes(s.Proof))
		if err != nil {
			t.Fatalf("account %s slot %s: %v", r.Address, s.Key, err)
		}
		want := rlpString(trimmed(value[:]))
		if value == ([32]byte{}) {
			want = nil
		}
		if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("account %s slot %s: proven %x, want %x", r.Address, s.Key, got, want)
		}
		checked++
	}
	return checked
}

func errorIsProof(err error) bool {
	return err != nil && errors.Is(err, ErrInvalidProof) && errors.Is(err, ErrInvalidArgument)
}

func TestVerifyEthGetProofVectors(t *testing.T) {
	checkLeaks(t)
	data := testdata(t)
	checked := 0

	// execution-apis: JSON-RPC transcripts at the block whose stateRoot get-latest.io has.
	latest := hash32(t, "0x6da8f636cdc85dbe8c1b5299e5db22f462c041febaf3b78cac1040152ee30b3b")
	ios, _ := filepath.Glob(filepath.Join(data, "execution-apis", "eth_getProof", "*.io"))
	if len(ios) == 0 {
		t.Fatal("no eth_getProof transcripts")
	}
	for _, f := range ios {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			resp, ok := strings.CutPrefix(line, "<< ")
			if !ok {
				continue
			}
			var msg struct {
				Result proofResult `json:"result"`
			}
			if err := json.Unmarshal([]byte(resp), &msg); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			checked += checkProofResult(t, latest, msg.Result)
		}
	}

	// ethereumjs: bare results; the root is keccak256 of the first account-proof node.
	files, _ := filepath.Glob(filepath.Join(data, "ethereumjs-proofs", "ropsten_*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r proofResult
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		root := keccak(unhex(t, r.AccountProof[0]))
		if got := hexRoot(root); got != "0xd487ffaf2f2838d69417f81c9d2bfca5d2e0d024ddda433bba9b8f2099eb96e5" {
			t.Fatalf("%s: root %s", f, got)
		}
		checked += checkProofResult(t, root, r)
	}

	// providerData: {blockTag: result}; two blocks anchor their roots independently.
	anchored := map[string][32]byte{}
	for _, tag := range []string{"0x7a11f", "0x7a120"} {
		raw, err := os.ReadFile(filepath.Join(data, "ethereumjs-proofs", "providerData", "blocks", "block"+tag+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var block struct {
			StateRoot string `json:"stateRoot"`
		}
		if err := json.Unmarshal(raw, &block); err != nil {
			t.Fatal(err)
		}
		anchored[tag] = hash32(t, block.StateRoot)
	}
	files, _ = filepath.Glob(filepath.Join(data, "ethereumjs-proofs", "providerData", "accounts", "*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var byTag map[string]proofResult
		if err := json.Unmarshal(raw, &byTag); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for tag, r := range byTag {
			root := keccak(unhex(t, r.AccountProof[0]))
			if want, ok := anchored[tag]; ok && root != want {
				t.Fatalf("%s %s: keccak(proof[0]) %s, block stateRoot %s", f, tag, hexRoot(root), hexRoot(want))
			}
			checked += checkProofResult(t, root, r)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d proofs checked", checked)
	}
	t.Logf("%d account and storage proofs verified", checked)
}
