//! The contracts of generated blocks and their calls.
//!
//! - The ERC-20 token `BenchToken`, compiled from `testdata/evm-bench/BenchToken.sol`
//!   (solcjs 0.8.30, see its `SOURCES.md`) and read from the JSON record there at build
//!   time ([`Compiled::token`]); its `transfer` calldata and the slot of a holder's balance
//!   as Solidity lays a mapping out (key `k` of the mapping at slot `p` at
//!   keccak256(pad32(k) ++ pad32(p))).
//! - Three small contracts assembled here by hand (each opcode commented):
//!   [`stash_init`] deploys a contract that writes `k` slots in its constructor and whose
//!   code stores a word on a call with 64 bytes of calldata (`[key, value]`) and
//!   self-destructs to the caller on a call without calldata; [`FACTORY_RUNTIME`] deploys
//!   its calldata as init code with CREATE2 and salt 0 (the same code twice: the same
//!   address, a re-creation once the first is destroyed), reverting when the creation
//!   fails; [`RECORDER_RUNTIME`] stores the block's PREVRANDAO, timestamp, gas limit,
//!   beneficiary, number and base fee, so that every header field a block's execution can
//!   read reaches its state root.

use alloy_primitives::U256;
use eth::Address;
use state::H256;
use trie::keccak256;

/// `BenchToken.json` as compiled.
const TOKEN_JSON: &str = include_str!("../../../../testdata/evm-bench/BenchToken.json");

/// Why a compiled contract's record cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}.json: {problem}")]
pub struct ContractError {
    /// The contract.
    pub name: String,
    /// What is wrong.
    pub problem: String,
}

/// One compiled contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    /// The code a deployment leaves at the contract's address.
    pub runtime: Vec<u8>,
    /// The deployment code (constructor), with no arguments appended; it holds the
    /// runtime code.
    pub creation: Vec<u8>,
    /// `solc` and its version, as recorded.
    pub compiler: String,
}

impl Compiled {
    /// The contract `name` from its JSON record (`contract`, `runtime_bytecode`,
    /// `creation_bytecode`, `compiler_version`).
    pub fn from_json(json: &str, name: &str) -> Result<Compiled, ContractError> {
        let bad = |problem: String| ContractError { name: name.to_string(), problem };
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| bad(format!("not JSON: {e}")))?;
        if v["contract"] != name {
            return Err(bad("holds another contract".into()));
        }
        let code = |field: &str| -> Result<Vec<u8>, ContractError> {
            let text = v[field].as_str().ok_or_else(|| bad(format!("lacks {field}")))?;
            let bytes = hex::decode(text).map_err(|_| bad(format!("{field} is not hex")))?;
            if bytes.is_empty() {
                return Err(bad(format!("{field} is empty")));
            }
            Ok(bytes)
        };
        let compiler = v["compiler_version"].as_str().unwrap_or("unknown").to_string();
        let (runtime, creation) = (code("runtime_bytecode")?, code("creation_bytecode")?);
        // solc's deployment code copies the runtime code out of itself.
        if !creation.windows(runtime.len()).any(|w| w == runtime.as_slice()) {
            return Err(bad("the creation code does not hold the runtime code".into()));
        }
        Ok(Compiled { runtime, creation, compiler })
    }

    /// The ERC-20 token `BenchToken`.
    pub fn token() -> Result<Compiled, ContractError> {
        Compiled::from_json(TOKEN_JSON, "BenchToken")
    }
}

/// The first four bytes of keccak256 of a function's signature.
pub fn selector(signature: &str) -> [u8; 4] {
    let mut s = [0u8; 4];
    s.copy_from_slice(&keccak256(signature.as_bytes()).0[..4]);
    s
}

/// A 32-byte ABI word of an address.
pub fn address_word(address: &Address) -> [u8; 32] {
    let mut w = [0u8; 32];
    w[12..].copy_from_slice(address);
    w
}

/// The slot of key `key` (a 32-byte word) of the mapping at `slot`.
pub fn mapping_slot(key: [u8; 32], slot: u64) -> H256 {
    let mut input = [0u8; 64];
    input[..32].copy_from_slice(&key);
    input[32..].copy_from_slice(&U256::from(slot).to_be_bytes::<32>());
    keccak256(&input)
}

/// `BenchToken.balanceOf[holder]`'s slot (the mapping is in slot 1).
pub fn token_balance_slot(holder: &Address) -> H256 {
    mapping_slot(address_word(holder), 1)
}

/// Calldata of `BenchToken.transfer(to, value)`.
pub fn transfer_call(to: &Address, value: u64) -> Vec<u8> {
    let mut data = selector("transfer(address,uint256)").to_vec();
    data.extend_from_slice(&address_word(to));
    data.extend_from_slice(&U256::from(value).to_be_bytes::<32>());
    data
}

/// The stash contract's code (15 bytes).
pub const STASH_RUNTIME: [u8; 15] = [
    0x36, // CALLDATASIZE
    0x60, 0x06, // PUSH1 6
    0x57, // JUMPI: with calldata, to the store
    0x33, // CALLER
    0xff, // SELFDESTRUCT: everything to the caller
    0x5b, // JUMPDEST (6)
    0x60, 0x20, // PUSH1 32
    0x35, // CALLDATALOAD: the value
    0x60, 0x00, // PUSH1 0
    0x35, // CALLDATALOAD: the key
    0x55, // SSTORE
    0x00, // STOP
];

/// The most slots a stash's constructor writes.
pub const STASH_SLOTS_MAX: u8 = 16;

/// Init code of a stash whose constructor writes slots `1..=slots` (values from `tag`,
/// never zero), then returns [`STASH_RUNTIME`]. `slots` is at most [`STASH_SLOTS_MAX`].
pub fn stash_init(slots: u8, tag: u32) -> Vec<u8> {
    let slots = slots.min(STASH_SLOTS_MAX);
    let mut code = Vec::new();
    for slot in 1..=slots {
        let value = (tag | 1).wrapping_add(u32::from(slot)).max(1);
        code.push(0x63); // PUSH4 value
        code.extend_from_slice(&value.to_be_bytes());
        code.extend_from_slice(&[0x60, slot, 0x55]); // PUSH1 slot, SSTORE
    }
    // The runtime code follows this 11-byte tail.
    let offset = code.len() + 11;
    // Invariant: at most 16 slots of 8 bytes each and the tail: below 256.
    let offset = u8::try_from(offset).unwrap_or(u8::MAX);
    code.extend_from_slice(&[
        0x60, 15,   // PUSH1 15: the runtime's length
        0x80, // DUP1
        0x60, offset, // PUSH1 offset: where it starts
        0x60, 0x00, // PUSH1 0: to memory 0
        0x39, // CODECOPY
        0x60, 0x00, // PUSH1 0
        0xf3, // RETURN memory[0..15]
    ]);
    code.extend_from_slice(&STASH_RUNTIME);
    code
}

/// Calldata of a stash's store: `value` at `key`.
pub fn stash_store_call(key: u64, value: u64) -> Vec<u8> {
    let mut data = U256::from(key).to_be_bytes::<32>().to_vec();
    data.extend_from_slice(&U256::from(value).to_be_bytes::<32>());
    data
}

/// The factory's code (23 bytes): CREATE2 of its calldata with salt 0.
pub const FACTORY_RUNTIME: [u8; 23] = [
    0x36, // CALLDATASIZE
    0x60, 0x00, // PUSH1 0
    0x60, 0x00, // PUSH1 0
    0x37, // CALLDATACOPY: the calldata to memory 0
    0x60, 0x00, // PUSH1 0: the salt
    0x36, // CALLDATASIZE: the size
    0x60, 0x00, // PUSH1 0: the offset
    0x60, 0x00, // PUSH1 0: no value
    0xf5, // CREATE2
    0x60, 0x15, // PUSH1 21
    0x57, // JUMPI: a created address, to the end
    0x60, 0x00, // PUSH1 0
    0x80, // DUP1
    0xfd, // REVERT: the creation failed
    0x5b, // JUMPDEST (21)
    0x00, // STOP
];

/// The recorder's code (25 bytes): six header fields into slots 0 to 5.
pub const RECORDER_RUNTIME: [u8; 25] = [
    0x44, 0x60, 0x00, 0x55, // PREVRANDAO, PUSH1 0, SSTORE
    0x42, 0x60, 0x01, 0x55, // TIMESTAMP, PUSH1 1, SSTORE
    0x45, 0x60, 0x02, 0x55, // GASLIMIT, PUSH1 2, SSTORE
    0x41, 0x60, 0x03, 0x55, // COINBASE, PUSH1 3, SSTORE
    0x43, 0x60, 0x04, 0x55, // NUMBER, PUSH1 4, SSTORE
    0x48, 0x60, 0x05, 0x55, // BASEFEE, PUSH1 5, SSTORE
    0x00, // STOP
];

/// The address CREATE2 of `init` with salt 0 by `factory` gives.
pub fn create2_address(factory: &Address, init: &[u8]) -> Address {
    let mut input = vec![0xff];
    input.extend_from_slice(factory);
    input.extend_from_slice(&[0u8; 32]);
    input.extend_from_slice(&keccak256(init).0);
    let mut address = [0u8; 20];
    address.copy_from_slice(&keccak256(&input).0[12..]);
    address
}

/// The address CREATE by `sender` at `nonce` gives: keccak256(RLP[sender, nonce]).
pub fn create_address(sender: &Address, nonce: u64) -> Address {
    alloy_primitives::Address::from(*sender).create(nonce).into_array()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_record_holds_code_and_the_known_selector() {
        let token = Compiled::token().unwrap();
        assert!(token.compiler.starts_with("0.8.30"), "{}", token.compiler);
        assert!(token.runtime.len() > 1000);
        // The ERC-20 selector everybody knows.
        assert_eq!(transfer_call(&[1; 20], 5)[..4], [0xa9, 0x05, 0x9c, 0xbb]);
        assert_eq!(transfer_call(&[1; 20], 5).len(), 68);
        assert_ne!(token_balance_slot(&[1; 20]), token_balance_slot(&[2; 20]));
        assert!(Compiled::from_json("{}", "BenchToken").is_err());
        let wrong =
            r#"{"contract": "BenchToken", "runtime_bytecode": "zz", "creation_bytecode": "00"}"#;
        assert!(Compiled::from_json(wrong, "BenchToken").is_err());
    }

    #[test]
    fn stash_init_code_ends_with_the_runtime_it_copies() {
        for slots in [0u8, 1, 4, STASH_SLOTS_MAX, 200] {
            let init = stash_init(slots, 7);
            let written = usize::from(slots.min(STASH_SLOTS_MAX));
            assert_eq!(init.len(), written * 8 + 11 + STASH_RUNTIME.len());
            assert_eq!(init[init.len() - 15..], STASH_RUNTIME);
            // The CODECOPY offset points at the runtime.
            assert_eq!(usize::from(init[written * 8 + 4]), written * 8 + 11);
        }
        // The jump targets are JUMPDESTs.
        assert_eq!(STASH_RUNTIME[6], 0x5b);
        assert_eq!(FACTORY_RUNTIME[21], 0x5b);
        assert_ne!(
            create2_address(&[1; 20], &stash_init(1, 0)),
            create2_address(&[1; 20], &stash_init(2, 0))
        );
    }
}
