package arbor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The byte formats of the C ABI (crates/ffi/src/lib.rs), all integers big-endian:
//
//	change set: count (u32), then per change
//	            account_len (u8: 0 | 32) ‖ account ‖ key_len (u16) ‖ key ‖
//	            op (u8: 0 delete, 1 set) ‖ [value_len (u32) ‖ value]
//	proof:      count (u32), then per node len (u32) ‖ node

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
	bad := &Error{Op: "prove", Kind: ErrCorrupt, Message: "malformed proof encoding from Rust"}
	if len(b) < 4 {
		return nil, bad
	}
	count := binary.BigEndian.Uint32(b)
	rest := b[4:]
	if uint64(count) > uint64(len(rest)/4) {
		return nil, bad
	}
	nodes := make([][]byte, 0, count)
	for range count {
		if len(rest) < 4 {
			return nil, bad
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, bad
		}
		nodes = append(nodes, rest[:n:n])
		rest = rest[n:]
	}
	if len(rest) != 0 {
		return nil, bad
	}
	return nodes, nil
}
