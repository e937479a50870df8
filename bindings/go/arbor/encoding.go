package arbor

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
)

// The byte formats of the C ABI (crates/ffi/src/lib.rs), all integers big-endian:
//
//	change set: count (u32), then per change
//	            account_len (u8: 0 | 32) ‖ account ‖ key_len (u16) ‖ key ‖
//	            op (u8: 0 delete, 1 set) ‖ [value_len (u32) ‖ value]
//	proof:      count (u32), then per node len (u32) ‖ node
//	account changes (crates/ffi/src/account_commit.rs): count (u32), then per account
//	            address (20) ‖ op (u8: 0 remove, 1 write) ‖ [nonce (u64) ‖ balance (32) ‖
//	            code_hash (32) ‖ clear_storage (u8) ‖ slots (u32) ‖ per slot
//	            slot (32) ‖ value (32)], then codes (u32) ‖ per code len (u32) ‖ code
//	account proof (crates/ffi/src/account.rs):
//	            exists (u8: 0 | 1) ‖ nonce (u64) ‖ balance (32) ‖ storage_root (32) ‖
//	            code_hash (32) ‖ account proof (a proof) ‖ count (u32), then per slot
//	            slot (32) ‖ value (32) ‖ proof (a proof)

const (
	opDelete = 0
	opSet    = 1
)

// checkKey rejects a key Rust would refuse: nil (no key given) or longer than KeyMax.
// An empty non-nil key is a valid key.
func checkKey(op string, key []byte) error {
	if key == nil {
		return invalid(op, "key is nil")
	}
	if len(key) > KeyMax {
		return invalid(op, fmt.Sprintf("key: %d bytes exceed the %d-byte limit", len(key), KeyMax))
	}
	return nil
}

// encodeChanges checks and encodes a change set.
func encodeChanges(changes []Change) ([]byte, error) {
	if uint64(len(changes)) > math.MaxUint32 {
		return nil, invalid("commit", fmt.Sprintf("%d changes exceed the 2^32-1 limit", len(changes)))
	}
	size := 4
	for i, c := range changes {
		if err := checkKey("commit", c.Key); err != nil {
			err.(*Error).Message = fmt.Sprintf("change %d: %s", i, err.(*Error).Message)
			return nil, err
		}
		if len(c.Value) > ValueMax {
			return nil, invalid("commit", fmt.Sprintf("change %d: value: %d bytes exceed the %d-byte limit", i, len(c.Value), ValueMax))
		}
		size += 1 + 2 + len(c.Key) + 1
		if c.Trie.storage {
			size += 32
		}
		if len(c.Value) > 0 {
			size += 4 + len(c.Value)
		}
		if size > inputMax {
			return nil, invalid("commit", fmt.Sprintf("the change set exceeds the %d-byte limit", inputMax))
		}
	}
	out := make([]byte, 0, size)
	out = binary.BigEndian.AppendUint32(out, uint32(len(changes)))
	for _, c := range changes {
		if c.Trie.storage {
			out = append(out, 32)
			out = append(out, c.Trie.account[:]...)
		} else {
			out = append(out, 0)
		}
		out = binary.BigEndian.AppendUint16(out, uint16(len(c.Key)))
		out = append(out, c.Key...)
		if len(c.Value) == 0 {
			out = append(out, opDelete)
		} else {
			out = append(out, opSet)
			out = binary.BigEndian.AppendUint32(out, uint32(len(c.Value)))
			out = append(out, c.Value...)
		}
	}
	return out, nil
}

// encodeProof encodes proof nodes.
func encodeProof(nodes [][]byte) ([]byte, error) {
	if uint64(len(nodes)) > math.MaxUint32 {
		return nil, invalid("verify proof", "too many proof nodes")
	}
	size := 4
	for _, n := range nodes {
		if uint64(len(n)) > math.MaxUint32 {
			return nil, invalid("verify proof", "a proof node exceeds 4 GiB")
		}
		size += 4 + len(n)
		if size > inputMax {
			return nil, invalid("verify proof", fmt.Sprintf("the proof exceeds the %d-byte limit", inputMax))
		}
	}
	out := make([]byte, 0, size)
	out = binary.BigEndian.AppendUint32(out, uint32(len(nodes)))
	for _, n := range nodes {
		out = binary.BigEndian.AppendUint32(out, uint32(len(n)))
		out = append(out, n...)
	}
	return out, nil
}

// decodeProof decodes proof nodes (sub-slices of b, capped so that appending to one
// does not overwrite the next).
func decodeProof(b []byte) ([][]byte, error) {
	nodes, rest, ok := takeProof(b)
	if !ok || len(rest) != 0 {
		return nil, malformed("prove", "proof")
	}
	return nodes, nil
}

// malformed is the error of bytes from Rust that do not decode as what (a bug).
func malformed(op, what string) *Error {
	return &Error{Op: op, Kind: ErrCorrupt, Message: "malformed " + what + " encoding from Rust"}
}

// takeProof decodes the proof at the start of b: its nodes (capped sub-slices of b) and
// the bytes after it; ok is false when b does not start with a whole proof.
func takeProof(b []byte) (nodes [][]byte, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	count := binary.BigEndian.Uint32(b)
	rest = b[4:]
	if uint64(count) > uint64(len(rest)/4) {
		return nil, nil, false
	}
	nodes = make([][]byte, 0, count)
	for range count {
		if len(rest) < 4 {
			return nil, nil, false
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, nil, false
		}
		nodes = append(nodes, rest[:n:n])
		rest = rest[n:]
	}
	return nodes, rest, true
}

// encodeAccountChanges checks and encodes an account change set (the format above).
func encodeAccountChanges(changes []AccountChange, code [][]byte) ([]byte, error) {
	const op = "commit accounts"
	if uint64(len(changes)) > math.MaxUint32 || uint64(len(code)) > math.MaxUint32 {
		return nil, invalid(op, "more than 2^32-1 accounts or codes")
	}
	seen := make(map[[20]byte]bool, len(changes))
	out := binary.BigEndian.AppendUint32(nil, uint32(len(changes)))
	for _, c := range changes {
		if seen[c.Address] {
			return nil, invalid(op, fmt.Sprintf("account 0x%x given twice", c.Address))
		}
		seen[c.Address] = true
		out = append(out, c.Address[:]...)
		if c.Remove {
			out = append(out, 0)
			continue
		}
		balance := c.Balance
		if balance == nil {
			balance = new(big.Int)
		}
		if balance.Sign() < 0 || balance.BitLen() > 256 {
			return nil, invalid(op, fmt.Sprintf("account 0x%x: balance %s is not a 256-bit unsigned number", c.Address, balance))
		}
		codeHash := c.CodeHash
		if codeHash == ([32]byte{}) {
			codeHash = EmptyCodeHash
		}
		out = append(out, 1)
		out = binary.BigEndian.AppendUint64(out, c.Nonce)
		out = append(out, balance.FillBytes(make([]byte, 32))...)
		out = append(out, codeHash[:]...)
		if c.ClearStorage {
			out = append(out, 1)
		} else {
			out = append(out, 0)
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(c.Storage)))
		for slot, value := range c.Storage {
			out = append(out, slot[:]...)
			out = append(out, value[:]...)
		}
		if len(out) > inputMax {
			return nil, invalid(op, fmt.Sprintf("the change set exceeds the %d-byte limit", inputMax))
		}
	}
	out = binary.BigEndian.AppendUint32(out, uint32(len(code)))
	for i, c := range code {
		if len(c) == 0 || len(c) > ValueMax {
			return nil, invalid(op, fmt.Sprintf("code %d: %d bytes, not 1 to %d", i, len(c), ValueMax))
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(c)))
		out = append(out, c...)
		if len(out) > inputMax {
			return nil, invalid(op, fmt.Sprintf("the change set exceeds the %d-byte limit", inputMax))
		}
	}
	return out, nil
}

// decodeAccountProof decodes an account proof (the format above).
func decodeAccountProof(op string, b []byte) (*AccountProof, error) {
	bad := malformed(op, "account proof")
	if len(b) < 1+8+32+32+32 || b[0] > 1 {
		return nil, bad
	}
	p := &AccountProof{Exists: b[0] == 1}
	p.Account.Nonce = binary.BigEndian.Uint64(b[1:])
	p.Account.Balance = new(big.Int).SetBytes(b[9:41])
	copy(p.Account.StorageRoot[:], b[41:73])
	copy(p.Account.CodeHash[:], b[73:105])
	nodes, rest, ok := takeProof(b[105:])
	if !ok || len(rest) < 4 {
		return nil, bad
	}
	p.AccountProof = nodes
	count := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(count) > uint64(len(rest)/(64+4)) {
		return nil, bad
	}
	p.StorageProof = make([]StorageProof, count)
	for i := range p.StorageProof {
		s := &p.StorageProof[i]
		if len(rest) < 64 {
			return nil, bad
		}
		copy(s.Slot[:], rest[:32])
		copy(s.Value[:], rest[32:64])
		if s.Proof, rest, ok = takeProof(rest[64:]); !ok {
			return nil, bad
		}
	}
	if len(rest) != 0 {
		return nil, bad
	}
	return p, nil
}
