package arbor

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
)

// ProofSlotsMax is the most slots one GetProof or GetProofAt call proves.
const ProofSlotsMax = 4096

// EmptyCodeHash is keccak256 of no bytes: the code hash of an account without code.
var EmptyCodeHash = [32]byte{
	0xc5, 0xd2, 0x46, 0x01, 0x86, 0xf7, 0x23, 0x3c, 0x92, 0x7e, 0x7d, 0xb2, 0xdc, 0xc7, 0x03, 0xc0,
	0xe5, 0x00, 0xb6, 0x53, 0xca, 0x82, 0x27, 0x3b, 0x7b, 0xfa, 0xd8, 0x04, 0x5d, 0x85, 0xa4, 0x70,
}

// AccountChange is one account's change in CommitAccounts: either Remove (the account and
// all its storage go), or the account's new fields, with its storage first emptied when
// ClearStorage is set (self-destruct and re-creation in one block) and then Storage's
// slots written (a zero value deletes the slot). The storage root is Arbor's to compute.
type AccountChange struct {
	Address [20]byte
	Remove  bool
	Nonce   uint64
	// Balance in wei: nil is zero; negative or wider than 256 bits is refused.
	Balance *big.Int
	// CodeHash is keccak256 of the account's code; the zero value means no code
	// (EmptyCodeHash). Its code must be given to the same CommitAccounts call or be in the
	// database already.
	CodeHash     [32]byte
	ClearStorage bool
	Storage      map[[32]byte][32]byte
}

// Account is an Ethereum account as the state trie commits to it: the leaf
// RLP [nonce, balance, storage_root, code_hash] under keccak256(address).
type Account struct {
	Nonce uint64
	// Balance is the balance in wei (never nil in an Account this package returns).
	Balance     *big.Int
	StorageRoot [32]byte
	CodeHash    [32]byte
}

// StorageProof is the proof of one storage slot: its value (zero when absent) and the
// storage-trie nodes on the path of keccak256(slot), root first.
type StorageProof struct {
	Slot  [32]byte
	Value [32]byte
	Proof [][]byte
}

// AccountProof is an eth_getProof (EIP-1186) answer: an account (all-empty when it does
// not exist: zero nonce and balance, the empty trie's root, the empty code's hash), its
// proof in the state trie, and one proof per slot asked for, in the order asked. Its
// MarshalJSON writes the eth_getProof result object, which `arbor verify-proof` checks.
type AccountProof struct {
	Address [20]byte
	// Exists reports whether the account exists (its proof is then an inclusion proof).
	Exists       bool
	Account      Account
	AccountProof [][]byte
	StorageProof []StorageProof
}

// CommitAccounts commits Ethereum account changes and new contract code (each stored
// under its keccak256, computed by Rust) as the next block, with Ethereum's account model:
// Arbor computes the storage roots of the touched accounts, folds them into the account
// leaves and commits the state trie, in one atomic, revertable block. An address given
// twice, a code hash with no code, or a database in another layout than LayoutEthereum
// fails with ErrInvalidArgument and commits nothing.
func (db *DB) CommitAccounts(changes []AccountChange, code [][]byte) (Head, error) {
	h, err := db.use("commit accounts")
	if err != nil {
		return Head{}, err
	}
	enc, err := encodeAccountChanges(changes, code)
	if err != nil {
		return Head{}, err
	}
	return cCommitAccounts(h, enc)
}

// GetAccount returns the account at address at the head, or (nil, nil) when it does not
// exist. On a database in another layout than LayoutEthereum it fails with
// ErrInvalidArgument, and so it does when the key holds no Ethereum account (a main trie
// written with Commit in another format).
func (db *DB) GetAccount(address [20]byte) (*Account, error) {
	h, err := db.use("get account")
	if err != nil {
		return nil, err
	}
	return cGetAccount(h, nil, address[:])
}

// GetAccountAt is GetAccount at a recent block (the window of GetAt; outside it the
// error matches ErrOutsideWindow).
func (db *DB) GetAccountAt(block uint64, address [20]byte) (*Account, error) {
	h, err := db.use("get account at")
	if err != nil {
		return nil, err
	}
	return cGetAccount(h, &block, address[:])
}

// GetStorage returns the value of slot in the storage of address at the head: a
// big-endian word, zero when the slot is absent (also when the account does not exist).
func (db *DB) GetStorage(address [20]byte, slot [32]byte) ([32]byte, error) {
	h, err := db.use("get storage")
	if err != nil {
		return [32]byte{}, err
	}
	return cGetStorage(h, nil, address[:], slot[:])
}

// GetStorageAt is GetStorage at a recent block (the window of GetAt).
func (db *DB) GetStorageAt(block uint64, address [20]byte, slot [32]byte) ([32]byte, error) {
	h, err := db.use("get storage at")
	if err != nil {
		return [32]byte{}, err
	}
	return cGetStorage(h, &block, address[:], slot[:])
}

// GetCode returns the contract code whose keccak256 is codeHash (an empty, non-nil slice
// for the empty code's hash), or (nil, nil) when the database holds none. Code is kept by
// hash for every block the database holds, so there is no GetCodeAt.
func (db *DB) GetCode(codeHash [32]byte) ([]byte, error) {
	h, err := db.use("get code")
	if err != nil {
		return nil, err
	}
	return cGetCode(h, codeHash[:])
}

// GetProof returns the eth_getProof answer for address and slots (at most ProofSlotsMax,
// repeats allowed) at the head, with the head it is of: its Root is what the proof
// verifies against (see VerifyProof). Absent accounts and slots get exclusion proofs.
// Rust checks the answer against the root before it returns it.
func (db *DB) GetProof(address [20]byte, slots ...[32]byte) (*AccountProof, Head, error) {
	return db.getProof("get proof", nil, address, slots)
}

// GetProofAt is GetProof at a recent block (the window of GetAt; outside it the error
// matches ErrOutsideWindow): the Head returned is that block's.
func (db *DB) GetProofAt(block uint64, address [20]byte, slots ...[32]byte) (*AccountProof, Head, error) {
	return db.getProof("get proof at", &block, address, slots)
}

func (db *DB) getProof(op string, block *uint64, address [20]byte, slots [][32]byte) (*AccountProof, Head, error) {
	h, err := db.use(op)
	if err != nil {
		return nil, Head{}, err
	}
	if len(slots) > ProofSlotsMax {
		return nil, Head{}, invalid(op, fmt.Sprintf("%d slots exceed the %d-slot limit", len(slots), ProofSlotsMax))
	}
	words := make([]byte, 0, 32*len(slots))
	for _, s := range slots {
		words = append(words, s[:]...)
	}
	enc, head, err := cGetProof(op, h, block, address[:], words)
	if err != nil {
		return nil, Head{}, err
	}
	p, err := decodeAccountProof(op, enc)
	if err != nil {
		return nil, Head{}, err
	}
	p.Address = address
	return p, head, nil
}

// MarshalJSON writes the eth_getProof (EIP-1186) result object: address, accountProof,
// balance, codeHash, nonce, storageHash and storageProof [{key, value, proof}], numbers as
// JSON-RPC quantities, bytes as 0x-prefixed hex.
func (p *AccountProof) MarshalJSON() ([]byte, error) {
	type storage struct {
		Key   string   `json:"key"`
		Value string   `json:"value"`
		Proof []string `json:"proof"`
	}
	type result struct {
		Address      string    `json:"address"`
		AccountProof []string  `json:"accountProof"`
		Balance      string    `json:"balance"`
		CodeHash     string    `json:"codeHash"`
		Nonce        string    `json:"nonce"`
		StorageHash  string    `json:"storageHash"`
		StorageProof []storage `json:"storageProof"`
	}
	balance := p.Account.Balance
	if balance == nil {
		balance = new(big.Int)
	}
	if balance.Sign() < 0 {
		return nil, invalid("marshal proof", "a negative balance")
	}
	r := result{
		Address:      hexData(p.Address[:]),
		AccountProof: hexNodes(p.AccountProof),
		Balance:      "0x" + balance.Text(16),
		CodeHash:     hexData(p.Account.CodeHash[:]),
		Nonce:        fmt.Sprintf("%#x", p.Account.Nonce),
		StorageHash:  hexData(p.Account.StorageRoot[:]),
		StorageProof: make([]storage, len(p.StorageProof)),
	}
	for i, s := range p.StorageProof {
		r.StorageProof[i] = storage{
			Key:   hexData(s.Slot[:]),
			Value: "0x" + new(big.Int).SetBytes(s.Value[:]).Text(16),
			Proof: hexNodes(s.Proof),
		}
	}
	return json.Marshal(r)
}

func hexData(b []byte) string { return "0x" + hex.EncodeToString(b) }

func hexNodes(nodes [][]byte) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = hexData(n)
	}
	return out
}
