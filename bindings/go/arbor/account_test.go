package arbor

// Ethereum accounts through Go: CommitAccounts against a model whose state roots the test
// computes on its own (the account leaves and storage tries built by hand and committed
// with plain Commits to a scratch database), reads at the head and at recent blocks,
// eth_getProof answers checked with VerifyProof and by `arbor verify-proof`, and what is
// refused.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// modelAccount is an account as the test expects Arbor to hold it.
type modelAccount struct {
	nonce    uint64
	balance  *big.Int
	codeHash [32]byte
	storage  map[[32]byte][32]byte
}

// accountModel is a whole state: address → account.
type accountModel map[[20]byte]modelAccount

func (m accountModel) clone() accountModel {
	out := make(accountModel, len(m))
	for a, acc := range m {
		storage := make(map[[32]byte][32]byte, len(acc.storage))
		for s, v := range acc.storage {
			storage[s] = v
		}
		acc.storage = storage
		out[a] = acc
	}
	return out
}

// apply is CommitAccounts' meaning: a removal drops the account and its storage; a write
// sets the fields, empties the storage first when asked, then writes the slots (a zero
// value deletes).
func (m accountModel) apply(changes []AccountChange) {
	for _, c := range changes {
		if c.Remove {
			delete(m, c.Address)
			continue
		}
		storage := map[[32]byte][32]byte{}
		if old, ok := m[c.Address]; ok && !c.ClearStorage {
			storage = old.storage
		}
		for s, v := range c.Storage {
			if v == ([32]byte{}) {
				delete(storage, s)
			} else {
				storage[s] = v
			}
		}
		balance := new(big.Int)
		if c.Balance != nil {
			balance.Set(c.Balance)
		}
		codeHash := c.CodeHash
		if codeHash == ([32]byte{}) {
			codeHash = EmptyCodeHash
		}
		m[c.Address] = modelAccount{nonce: c.Nonce, balance: balance, codeHash: codeHash, storage: storage}
	}
}

// storageRoot is the root of an account's storage trie: keccak256(slot) → RLP(trimmed value).
func (a modelAccount) storageRoot(t testing.TB, calc *rootCalc) [32]byte {
	t.Helper()
	if len(a.storage) == 0 {
		return emptyRoot
	}
	slots := make([]Change, 0, len(a.storage))
	for s, v := range a.storage {
		k := keccak(s[:])
		slots = append(slots, Change{Key: k[:], Value: rlpString(trimmed(v[:]))})
	}
	return calc.root(t, slots)
}

// root is the state root of the model, computed without CommitAccounts.
func (m accountModel) root(t testing.TB, calc *rootCalc) [32]byte {
	t.Helper()
	leaves := make([]Change, 0, len(m))
	for addr, a := range m {
		k := keccak(addr[:])
		leaves = append(leaves, Change{Key: k[:], Value: accountRLP(a.nonce, a.balance.Bytes(), a.storageRoot(t, calc), a.codeHash)})
	}
	return calc.root(t, leaves)
}

// randomBlock is one block of account changes over addrs and slots: writes (some clearing
// the storage first, some with new code), removals and zeroed slots.
func randomBlock(r *rand.Rand, addrs [][20]byte, slots [][32]byte) ([]AccountChange, [][]byte) {
	var changes []AccountChange
	var code [][]byte
	for _, a := range addrs {
		switch n := r.IntN(10); {
		case n < 4:
			continue
		case n == 4:
			changes = append(changes, AccountChange{Address: a, Remove: true})
			continue
		}
		c := AccountChange{
			Address:      a,
			Nonce:        r.Uint64N(1000),
			Balance:      new(big.Int).Lsh(big.NewInt(r.Int64N(1<<40)), uint(r.IntN(200))),
			ClearStorage: r.IntN(6) == 0,
			Storage:      map[[32]byte][32]byte{},
		}
		if r.IntN(3) == 0 {
			bytecode := []byte{0x60, byte(r.IntN(256)), 0x60, 0x00, 0x55}
			c.CodeHash = keccak(bytecode)
			code = append(code, bytecode)
		}
		for range r.IntN(12) {
			var v [32]byte
			if r.IntN(4) > 0 { // else a zero: the slot is deleted
				v[31-r.IntN(32)] = byte(1 + r.IntN(255))
			}
			c.Storage[slots[r.IntN(len(slots))]] = v
		}
		changes = append(changes, c)
	}
	return changes, code
}

// testAddresses and testSlots are what the random blocks touch; the last of each is never
// written (absent at every block).
func testAddresses(n int) [][20]byte {
	out := make([][20]byte, n)
	for i := range out {
		out[i] = [20]byte{0: 0xa0, 19: byte(i)}
	}
	return out
}

func testSlots(n int) [][32]byte {
	out := make([][32]byte, n)
	for i := range out {
		out[i][31] = byte(i)
		if i%3 == 0 {
			out[i][0] = 0xff // wide keys too
		}
	}
	return out
}

// checkAccountReads compares GetAccount(At), GetStorage(At) and GetCode with the model of
// a block (block nil: the head).
func checkAccountReads(t *testing.T, db *DB, block *uint64, m accountModel, addrs [][20]byte, slots [][32]byte) {
	t.Helper()
	for _, a := range addrs {
		var got *Account
		var err error
		if block == nil {
			got, err = db.GetAccount(a)
		} else {
			got, err = db.GetAccountAt(*block, a)
		}
		if err != nil {
			t.Fatalf("GetAccount(%x) at %v: %v", a, block, err)
		}
		want, exists := m[a]
		if (got != nil) != exists {
			t.Fatalf("GetAccount(%x) at %v = %+v, exists %v", a, block, got, exists)
		}
		if exists {
			if got.Nonce != want.nonce || got.Balance.Cmp(want.balance) != 0 || got.CodeHash != want.codeHash {
				t.Fatalf("GetAccount(%x) at %v = %+v, want %+v", a, block, got, want)
			}
			if code, err := db.GetCode(got.CodeHash); err != nil || code == nil || keccak(code) != got.CodeHash {
				t.Fatalf("GetCode(%x) = %x, %v", got.CodeHash, code, err)
			}
		}
		for _, s := range slots {
			var v [32]byte
			if block == nil {
				v, err = db.GetStorage(a, s)
			} else {
				v, err = db.GetStorageAt(*block, a, s)
			}
			if err != nil || v != want.storage[s] {
				t.Fatalf("GetStorage(%x, %x) at %v = %x, %v; want %x", a, s, block, v, err, want.storage[s])
			}
		}
	}
}

// checkAccountProof checks a GetProof answer against the model of its block: the values it
// claims, then every proof in it with VerifyProof (through checkProofResult, which also
// sees a tampered account proof fail).
func checkAccountProof(t *testing.T, p *AccountProof, root [32]byte, m accountModel, addr [20]byte, slots [][32]byte) {
	t.Helper()
	want, exists := m[addr]
	if p.Address != addr || p.Exists != exists || len(p.StorageProof) != len(slots) {
		t.Fatalf("proof of %x: address %x, exists %v (want %v), %d slots (want %d)", addr, p.Address, p.Exists, exists, len(p.StorageProof), len(slots))
	}
	if exists && (p.Account.Nonce != want.nonce || p.Account.Balance.Cmp(want.balance) != 0 || p.Account.CodeHash != want.codeHash) {
		t.Fatalf("proof of %x claims %+v, want %+v", addr, p.Account, want)
	}
	if !exists && (p.Account.Nonce != 0 || p.Account.Balance.Sign() != 0 || p.Account.StorageRoot != emptyRoot || p.Account.CodeHash != EmptyCodeHash) {
		t.Fatalf("proof of absent %x claims %+v, want the empty account", addr, p.Account)
	}
	for i, s := range slots {
		if sp := p.StorageProof[i]; sp.Slot != s || sp.Value != want.storage[s] {
			t.Fatalf("proof of %x slot %d: %x = %x, want %x = %x", addr, i, sp.Slot, sp.Value, s, want.storage[s])
		}
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var r proofResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	checkProofResult(t, root, r)
}

func TestCommitAccountsReadAndProve(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 59))
	db, _ := openTemp(t)
	calc := newRootCalc(t)
	addrs, slots := testAddresses(9), testSlots(16)
	written, writtenSlots := addrs[:len(addrs)-1], slots[:len(slots)-1]
	models := []accountModel{{}}
	heads := []Head{{Root: emptyRoot}}
	for b := uint64(1); b <= 8; b++ {
		changes, code := randomBlock(r, written, writtenSlots)
		head, err := db.CommitAccounts(changes, code)
		if err != nil {
			t.Fatalf("block %d: %v", b, err)
		}
		m := models[b-1].clone()
		m.apply(changes)
		if want := m.root(t, calc); head.Number != b || head.Root != want {
			t.Fatalf("seed %d block %d: CommitAccounts gave %v, the model's root is %s", seed, b, head, hexRoot(want))
		}
		models, heads = append(models, m), append(heads, head)
	}
	head := heads[len(heads)-1]
	checkAccountReads(t, db, nil, models[len(models)-1], addrs, slots)
	for b := uint64(0); b <= head.Number; b++ {
		checkAccountReads(t, db, &b, models[b], addrs, slots)
	}
	// Proofs at the head and at every block, of every account, with present, absent and
	// repeated slots in an order of their own.
	asked := append([][32]byte{slots[len(slots)-1]}, slots...)
	asked = append(asked, slots[2])
	for _, a := range addrs {
		p, h, err := db.GetProof(a, asked...)
		if err != nil || h != head {
			t.Fatalf("GetProof(%x) = head %v, %v; want head %v", a, h, err, head)
		}
		checkAccountProof(t, p, head.Root, models[head.Number], a, asked)
		for b := uint64(0); b <= head.Number; b++ {
			p, h, err := db.GetProofAt(b, a, asked...)
			if err != nil || h != heads[b] {
				t.Fatalf("GetProofAt(%d, %x) = head %v, %v; want %v", b, a, h, err, heads[b])
			}
			checkAccountProof(t, p, h.Root, models[b], a, asked)
		}
	}
	// No slots: the account proof alone.
	if p, _, err := db.GetProof(addrs[0]); err != nil || p.StorageProof == nil || len(p.StorageProof) != 0 {
		t.Fatalf("GetProof without slots = %+v, %v", p, err)
	}
}

// contractBlocks is block 1 (a contract with code and 20 slots, a user) and block 2 (slot
// 5 rewritten, slot 3 deleted, the contract's balance raised, the user removed).
func contractBlocks() (contract, user [20]byte, code []byte, blocks [2][]AccountChange) {
	contract, user = [20]byte{0: 0xc0, 19: 0xc0}, [20]byte{0: 0xee, 19: 0xee}
	code = []byte{0x60, 0x01, 0x60, 0x00, 0x55}
	storage := map[[32]byte][32]byte{}
	for i := range 20 {
		storage[[32]byte{31: byte(i)}] = [32]byte{31: byte(100 + i)}
	}
	blocks[0] = []AccountChange{
		{Address: contract, Nonce: 1, Balance: big.NewInt(7), CodeHash: keccak(code), Storage: storage},
		{Address: user, Nonce: 3, Balance: new(big.Int).Lsh(big.NewInt(1), 255)},
	}
	blocks[1] = []AccountChange{
		{Address: contract, Nonce: 2, Balance: big.NewInt(70), CodeHash: keccak(code), Storage: map[[32]byte][32]byte{
			{31: 5}: {31: 0x55}, {31: 3}: {},
		}},
		{Address: user, Remove: true},
	}
	return contract, user, code, blocks
}

// arborExit runs the CLI and returns its exit code and standard output.
func arborExit(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(arborBin(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String() + stderr.String()
	}
	t.Fatalf("arbor %s: %v", strings.Join(args, " "), err)
	return 0, ""
}

// The answer a Go user gets is accepted by `arbor verify-proof` bound to its question, is
// the answer `arbor prove --db` prints, and is refused once a byte of it changes.
func TestAccountProofThroughTheCLI(t *testing.T) {
	arborBin(t) // skip early when the CLI is missing
	db, dir := openTemp(t)
	contract, user, code, blocks := contractBlocks()
	for _, b := range blocks {
		if _, err := db.CommitAccounts(b, [][]byte{code}); err != nil {
			t.Fatal(err)
		}
	}
	slots := [][32]byte{{31: 5}, {31: 3}, {31: 99}, {31: 7}}
	slotArgs := []string{"--slot", "0x5", "--slot", "0x3", "--slot", "0x63", "--slot", "0x7"}
	type answer struct {
		addr  [20]byte
		head  Head
		json  []byte
		block string
	}
	var answers []answer
	for _, a := range [][20]byte{contract, user} {
		p, head, err := db.GetProof(a, slots...)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(p)
		answers = append(answers, answer{a, head, raw, ""})
		p, head, err = db.GetProofAt(1, a, slots...)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ = json.Marshal(p)
		answers = append(answers, answer{a, head, raw, "1"})
	}
	if err := db.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "proof.json")
	for _, ans := range answers {
		address := hexData(ans.addr[:])
		args := append([]string{"prove", "--db", dir, "--address", address}, slotArgs...)
		if ans.block != "" {
			args = append(args, "--block", ans.block)
		}
		var cli, ours any
		if err := json.Unmarshal([]byte(runArbor(t, args...)), &cli); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ans.json, &ours); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cli, ours) {
			t.Fatalf("arbor prove %s:\n%v\nGo's GetProof:\n%v", strings.Join(args[3:], " "), cli, ours)
		}
		verify := append([]string{"verify-proof", "--root", hexRoot(ans.head.Root), "--address", address}, slotArgs...)
		verify = append(verify, file)
		if err := os.WriteFile(file, ans.json, 0o600); err != nil {
			t.Fatal(err)
		}
		if exit, out := arborExit(t, verify...); exit != 0 || strings.TrimSpace(out) != "valid" {
			t.Fatalf("%s: exit %d, %q", strings.Join(verify, " "), exit, out)
		}
		// A changed hex digit in each node of the account proof, and in the claimed values.
		for needle, skip := range map[string]int{`"accountProof":["0x`: 2, `"balance":"0x`: 0, `"value":"0x`: 0} {
			at := bytes.Index(ans.json, []byte(needle)) + len(needle) + skip
			bad := bytes.Clone(ans.json)
			bad[at] = "123456789abcdef0"[strings.IndexByte("0123456789abcdef", bad[at])]
			if err := os.WriteFile(file, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			if exit, out := arborExit(t, verify...); exit != 1 || !strings.HasPrefix(out, "invalid") {
				t.Fatalf("%s with %s changed: exit %d, %q", strings.Join(verify, " "), needle, exit, out)
			}
		}
	}
}

func TestAccountReadsRefuse(t *testing.T) {
	db, _ := openTemp(t, WithConfigTOML("[history]\nrecent_blocks = 2\n"))
	contract, user, code, blocks := contractBlocks()
	for _, b := range blocks {
		if _, err := db.CommitAccounts(b, [][]byte{code}); err != nil {
			t.Fatal(err)
		}
	}
	// Absent things are not errors.
	if a, err := db.GetAccount(user); a != nil || err != nil {
		t.Fatalf("GetAccount of a removed account = %+v, %v", a, err)
	}
	if v, err := db.GetStorage(user, [32]byte{31: 1}); v != ([32]byte{}) || err != nil {
		t.Fatalf("GetStorage of a removed account = %x, %v", v, err)
	}
	if c, err := db.GetCode([32]byte{1}); c != nil || err != nil {
		t.Fatalf("GetCode of an unknown hash = %x, %v", c, err)
	}
	if c, err := db.GetCode(EmptyCodeHash); c == nil || len(c) != 0 || err != nil {
		t.Fatalf("GetCode(EmptyCodeHash) = %#v, %v; want an empty slice", c, err)
	}
	// Outside the window.
	for _, b := range []uint64{3, 1 << 62} {
		_, err := db.GetAccountAt(b, contract)
		wantKind(t, "GetAccountAt above the head", err, ErrOutsideWindow)
		_, err = db.GetStorageAt(b, contract, [32]byte{})
		wantKind(t, "GetStorageAt above the head", err, ErrOutsideWindow)
		_, _, err = db.GetProofAt(b, contract)
		wantKind(t, "GetProofAt above the head", err, ErrOutsideWindow)
	}
	for range 2 {
		if _, err := db.CommitAccounts(nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err := db.GetAccountAt(1, contract)
	wantKind(t, "GetAccountAt below the window", err, ErrOutsideWindow)
	// Too many slots.
	_, _, err = db.GetProof(contract, make([][32]byte, ProofSlotsMax+1)...)
	wantKind(t, "GetProof of too many slots", err, ErrInvalidArgument)
	if _, _, err := db.GetProof(contract, make([][32]byte, ProofSlotsMax)...); err != nil {
		t.Fatalf("GetProof of ProofSlotsMax slots: %v", err)
	}
	// A main trie written with Commit in another format holds no Ethereum account.
	k := keccak(user[:])
	mustCommit(t, db, []Change{{Key: k[:], Value: []byte("not an account")}})
	_, err = db.GetAccount(user)
	wantKind(t, "GetAccount of a leaf that is no account", err, ErrInvalidArgument)
	_, _, err = db.GetProof(user)
	wantKind(t, "GetProof of a leaf that is no account", err, ErrInvalidArgument)
	// Closed.
	if err := db.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = db.GetAccount(contract)
	wantKind(t, "GetAccount after Close", err, ErrClosed)
	_, err = db.CommitAccounts(nil, nil)
	wantKind(t, "CommitAccounts after Close", err, ErrClosed)
	_, _, err = db.GetProof(contract)
	wantKind(t, "GetProof after Close", err, ErrClosed)
	// Another layout.
	sub, _ := openTemp(t, WithLayout(LayoutSubstrateV1))
	_, err = sub.CommitAccounts(blocks[0], [][]byte{code})
	wantKind(t, "CommitAccounts in substrate-v1", err, ErrInvalidArgument)
	_, err = sub.GetAccount(contract)
	wantKind(t, "GetAccount in substrate-v1", err, ErrInvalidArgument)
	_, _, err = sub.GetProof(contract)
	wantKind(t, "GetProof in substrate-v1", err, ErrInvalidArgument)
}

func TestCommitAccountsRefuses(t *testing.T) {
	db, _ := openTemp(t)
	contract, _, code, blocks := contractBlocks()
	for name, c := range map[string]struct {
		changes []AccountChange
		code    [][]byte
	}{
		"negative balance":  {[]AccountChange{{Address: contract, Balance: big.NewInt(-1)}}, nil},
		"257-bit balance":   {[]AccountChange{{Address: contract, Balance: new(big.Int).Lsh(big.NewInt(1), 256)}}, nil},
		"address twice":     {[]AccountChange{{Address: contract}, {Address: contract, Remove: true}}, nil},
		"empty code":        {nil, [][]byte{{}}},
		"code too long":     {nil, [][]byte{make([]byte, ValueMax+1)}},
		"code hash no code": {blocks[0], nil},
	} {
		_, err := db.CommitAccounts(c.changes, c.code)
		wantKind(t, "CommitAccounts "+name, err, ErrInvalidArgument)
	}
	if h, err := db.Root(); err != nil || h.Number != 0 {
		t.Fatalf("Root() after refused commits = %v, %v", h, err)
	}
	// Code stored by an earlier block may be named again without its bytes.
	if _, err := db.CommitAccounts(blocks[0], [][]byte{code}); err != nil {
		t.Fatal(err)
	}
	if h, err := db.CommitAccounts(blocks[1], nil); err != nil || h.Number != 2 {
		t.Fatalf("a block naming stored code = %v, %v", h, err)
	}
}

// Rust checks the change set's bytes again: every cut of a valid encoding, flipped bytes
// and random garbage are ErrInvalidArgument (or, for a change that still decodes, a
// commit) and never a panic.
func TestRustRejectsBadAccountChanges(t *testing.T) {
	db, _ := openTemp(t)
	contract, _, code, blocks := contractBlocks()
	enc, err := encodeAccountChanges(blocks[0], [][]byte{code})
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(enc) {
		_, err := cCommitAccounts(db.handle, enc[:n])
		wantKind(t, "a cut change set", err, ErrInvalidArgument)
	}
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 1))
	committed := uint64(0)
	for i := range 300 {
		bad := bytes.Clone(enc)
		if i%2 == 0 {
			bad[r.IntN(len(bad))] ^= byte(1 + r.IntN(255))
		} else {
			bad = make([]byte, r.IntN(200))
			for j := range bad {
				bad[j] = byte(r.Uint32())
			}
		}
		switch _, err := cCommitAccounts(db.handle, bad); {
		case err == nil:
			committed++
		case !errors.Is(err, ErrInvalidArgument):
			t.Fatalf("seed %d, change set %x: %v, want ErrInvalidArgument", seed, bad, err)
		}
	}
	if h, err := db.Root(); err != nil || h.Number != committed {
		t.Fatalf("Root() = %v, %v; want block %d (the change sets that decoded)", h, err, committed)
	}
	// Addresses and words of the wrong length, past Go's types.
	_, err = cGetAccount(db.handle, nil, contract[:19])
	wantKind(t, "Rust GetAccount 19-byte address", err, ErrInvalidArgument)
	_, err = cGetStorage(db.handle, nil, contract[:], make([]byte, 33))
	wantKind(t, "Rust GetStorage 33-byte slot", err, ErrInvalidArgument)
	_, err = cGetCode(db.handle, make([]byte, 31))
	wantKind(t, "Rust GetCode 31-byte hash", err, ErrInvalidArgument)
	_, _, err = cGetProof("get proof", db.handle, nil, contract[:], make([]byte, 40))
	wantKind(t, "Rust GetProof 40 bytes of slots", err, ErrInvalidArgument)
}

// decodeAccountProof refuses every cut and extension of a valid answer (bytes that would
// come from a broken library) without panicking.
func TestDecodeAccountProofRefusesMalformed(t *testing.T) {
	db, _ := openTemp(t)
	contract, _, code, blocks := contractBlocks()
	if _, err := db.CommitAccounts(blocks[0], [][]byte{code}); err != nil {
		t.Fatal(err)
	}
	enc, _, err := cGetProof("get proof", db.handle, nil, contract[:], make([]byte, 64))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeAccountProof("get proof", enc); err != nil {
		t.Fatal(err)
	}
	for n := range len(enc) {
		if _, err := decodeAccountProof("get proof", enc[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v, want ErrCorrupt", n, err)
		}
	}
	bad := bytes.Clone(enc)
	bad[0] = 2
	for name, b := range map[string][]byte{"exists 2": bad, "trailing byte": append(bytes.Clone(enc), 0)} {
		if _, err := decodeAccountProof("get proof", b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

func TestEncodeAccountChangesBytes(t *testing.T) {
	got, err := encodeAccountChanges([]AccountChange{
		{Address: [20]byte{1}, Remove: true},
		{Address: [20]byte{2}, Nonce: 7, Balance: big.NewInt(9), ClearStorage: true, Storage: map[[32]byte][32]byte{{3}: {31: 4}}},
	}, [][]byte{[]byte("code")})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 2}
	want = append(want, append([]byte{1}, make([]byte, 19)...)...)
	want = append(want, 0)
	want = append(want, append([]byte{2}, make([]byte, 19)...)...)
	want = append(want, 1, 0, 0, 0, 0, 0, 0, 0, 7)
	want = append(want, append(make([]byte, 31), 9)...)
	want = append(want, EmptyCodeHash[:]...) // the zero CodeHash: no code
	want = append(want, 1, 0, 0, 0, 1)
	want = append(want, append([]byte{3}, make([]byte, 31)...)...)
	want = append(want, append(make([]byte, 31), 4)...)
	want = append(want, 0, 0, 0, 1, 0, 0, 0, 4, 'c', 'o', 'd', 'e')
	if !bytes.Equal(got, want) {
		t.Fatalf("encodeAccountChanges:\n got %x\nwant %x", got, want)
	}
}

// Reads and proofs at the head and at recent blocks run beside commits (go test -race),
// each answer of one block.
func TestAccountReadsBesideCommits(t *testing.T) {
	db, _ := openTemp(t)
	contract, _, code, blocks := contractBlocks()
	if _, err := db.CommitAccounts(blocks[0], [][]byte{code}); err != nil {
		t.Fatal(err)
	}
	slot := [32]byte{31: 1}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	stop := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p, h, err := db.GetProof(contract, slot)
				if err == nil {
					// Block b sets the slot to b (block 1: its initial 101).
					want := [32]byte{31: byte(h.Number)}
					if h.Number == 1 {
						want[31] = 101
					}
					if p.StorageProof[0].Value != want {
						err = errors.New("a proof's slot is not of its block")
					}
				}
				if err == nil {
					_, err = db.GetStorageAt(1, contract, slot)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for b := 2; b <= 20; b++ {
		c := blocks[1][0]
		c.Storage = map[[32]byte][32]byte{slot: {31: byte(b)}}
		if _, err := db.CommitAccounts([]AccountChange{c}, nil); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
