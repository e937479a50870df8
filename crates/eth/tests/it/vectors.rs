//! External vectors from the repository's `testdata/ethereum` (see its SOURCES.md): TrieTests,
//! genesis allocations with known roots, basic_genesis_tests, eth_getProof responses.

use std::collections::BTreeMap;

use alloy_primitives::U256;
use eth::{genesis_state_root, AccountProof, EthState, Genesis};
use serde_json::Value;
use state::{decode_hex, H256};
use trie::{keccak256, root_from_sorted, EthLayout, MemoryNodeSource, RlpItem, RlpListIter, Trie};

use crate::reference::reference_root;
use crate::{read_genesis, testdata, GENESIS_ROOTS};

fn read_json(rel: &str) -> Value {
    let path = testdata(rel);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// TrieTests string convention: `0x…` is hex, anything else is raw bytes.
fn bytes_of(v: &Value) -> Option<Vec<u8>> {
    let s = v.as_str()?;
    Some(match s.strip_prefix("0x") {
        Some(h) => decode_hex(h).unwrap(),
        None => s.as_bytes().to_vec(),
    })
}

/// Apply the operations to the mutable trie, check the root, and check the builder and the
/// reference on the final map.
fn check_ops(name: &str, ops: Vec<(Vec<u8>, Option<Vec<u8>>)>, secure: bool, root: &str) {
    let expected = H256::from_hex(root).unwrap();
    let mut t: Trie<MemoryNodeSource, EthLayout> = Trie::new(MemoryNodeSource::new());
    let mut model = BTreeMap::new();
    for (k, v) in ops {
        let k = if secure { keccak256(&k).0.to_vec() } else { k };
        match v {
            Some(v) if !v.is_empty() => {
                t.insert(&k, &v).unwrap();
                model.insert(k, v);
            }
            _ => {
                t.remove(&k).unwrap();
                model.remove(&k);
            }
        }
    }
    assert_eq!(t.root().unwrap(), expected, "{name}: mutable trie");
    let items: Vec<_> = model.iter().collect();
    assert_eq!(root_from_sorted::<EthLayout, _, _>(&items).unwrap().0, expected, "{name}: builder");
    assert_eq!(reference_root(&model), expected, "{name}: reference");
}

fn run_trie_file(file: &str, secure: bool) -> usize {
    let doc = read_json(&format!("ethereum-tests/TrieTests/{file}"));
    let mut n = 0;
    for (name, case) in doc.as_object().unwrap() {
        let root = case["root"].as_str().unwrap();
        let ops: Vec<(Vec<u8>, Option<Vec<u8>>)> = match &case["in"] {
            Value::Array(list) => {
                list.iter().map(|kv| (bytes_of(&kv[0]).unwrap(), bytes_of(&kv[1]))).collect()
            }
            Value::Object(map) => {
                let hex_encoded = map.get("hexEncoded").and_then(Value::as_bool).unwrap_or(false);
                map.iter()
                    .filter(|(k, _)| k.as_str() != "hexEncoded")
                    .map(|(k, v)| {
                        if hex_encoded {
                            (decode_hex(k).unwrap(), v.as_str().map(|s| decode_hex(s).unwrap()))
                        } else {
                            (bytes_of(&Value::String(k.clone())).unwrap(), bytes_of(v))
                        }
                    })
                    .collect()
            }
            other => panic!("{name}: unexpected input {other}"),
        };
        check_ops(&format!("{file}/{name}"), ops, secure, root);
        n += 1;
    }
    n
}

#[test]
fn trie_tests_all_files() {
    assert_eq!(run_trie_file("trietest.json", false), 5);
    assert_eq!(run_trie_file("trietest_secureTrie.json", true), 3);
    assert_eq!(run_trie_file("trieanyorder.json", false), 7);
    assert_eq!(run_trie_file("trieanyorder_secureTrie.json", true), 7);
    assert_eq!(run_trie_file("hex_encoded_securetrie_test.json", true), 3);
}

#[test]
fn trie_tests_next_prev() {
    let doc = read_json("ethereum-tests/TrieTests/trietestnextprev.json");
    for (name, case) in doc.as_object().unwrap() {
        let mut t: Trie<MemoryNodeSource, EthLayout> = Trie::new(MemoryNodeSource::new());
        for k in case["in"].as_array().unwrap() {
            let k = k.as_str().unwrap().as_bytes();
            t.insert(k, k).unwrap();
        }
        let tests = case["tests"].as_array().unwrap();
        assert!(!tests.is_empty());
        for probe in tests {
            let [p, prev, next] = [0, 1, 2].map(|i| probe[i].as_str().unwrap().as_bytes().to_vec());
            let got_prev = t.prev_before(&p).unwrap().map(|(k, _)| k).unwrap_or_default();
            let got_next = t.next_after(&p).unwrap().map(|(k, _)| k).unwrap_or_default();
            assert_eq!(got_prev, prev, "{name}: prev of {:?}", String::from_utf8_lossy(&p));
            assert_eq!(got_next, next, "{name}: next of {:?}", String::from_utf8_lossy(&p));
        }
    }
}

#[test]
fn genesis_roots_match() {
    for (file, root) in GENESIS_ROOTS {
        let g = read_genesis(file);
        let expected = H256::from_hex(root).unwrap();
        assert_eq!(genesis_state_root(&g), expected, "{file}: builder");
        if g.alloc.len() < 1000 {
            assert_eq!(
                EthState::from_genesis(&g).unwrap().root().unwrap(),
                expected,
                "{file}: mutable tries"
            );
        }
    }
}

/// The execution-apis genesis root also appears in its get-genesis block response.
#[test]
fn execution_apis_genesis_block_root() {
    let block = rpc_result("execution-apis/eth_getBlockByNumber/get-genesis.io");
    assert_eq!(block["stateRoot"].as_str().unwrap(), GENESIS_ROOTS[6].1);
}

#[test]
fn basic_genesis_tests_roots() {
    let doc = read_json("ethereum-tests/GenesisTests/basic_genesis_tests.json");
    let mut n = 0;
    for (name, case) in doc.as_object().unwrap() {
        let g = Genesis::from_value(case).unwrap();
        // `result` is the RLP genesis block; header field 3 is the state root.
        let block = decode_hex(case["result"].as_str().unwrap()).unwrap();
        let RlpItem::List(block) = RlpItem::decode_exact(&block).unwrap() else {
            panic!("{name}: block not a list")
        };
        let Some(Ok(RlpItem::List(header))) = RlpListIter::new(block).next() else {
            panic!("{name}: no header")
        };
        let state_root = RlpListIter::new(header).nth(3).unwrap().unwrap().string().unwrap();
        assert_eq!(genesis_state_root(&g).as_bytes(), state_root, "{name}");
        n += 1;
    }
    assert_eq!(n, 3);
}

fn rpc_result(rel: &str) -> Value {
    let text = std::fs::read_to_string(testdata(rel)).unwrap();
    let line = text.lines().find_map(|l| l.strip_prefix("<< ")).expect("a response line");
    let v: Value = serde_json::from_str(line).unwrap();
    v["result"].clone()
}

/// Verify a proof, then check that tampered copies are rejected.
fn check_proof(label: &str, result: &Value, root: &H256) {
    let proof = AccountProof::from_json(result).unwrap_or_else(|e| panic!("{label}: {e}"));
    proof.verify(root).unwrap_or_else(|e| panic!("{label}: {e}"));
    let mut tampered = Vec::new();
    let mut p = proof.clone();
    p.account.balance = U256::from(12345u64);
    tampered.push(("balance", p));
    let mut p = proof.clone();
    p.account.nonce += 1;
    tampered.push(("nonce", p));
    let mut p = proof.clone();
    let last = p.account_proof.len() - 1;
    let n = p.account_proof[last].len();
    p.account_proof[last][n / 2] ^= 0x01;
    tampered.push(("node byte", p));
    let mut p = proof.clone();
    p.account_proof.remove(0);
    tampered.push(("missing node", p));
    let mut p = proof.clone();
    p.account_proof.push(p.account_proof[0].clone());
    tampered.push(("extra node", p));
    if let Some(sp) = proof.storage_proof.first() {
        let mut p = proof.clone();
        p.storage_proof[0].value = sp.value.wrapping_add(U256::from(1u64));
        tampered.push(("storage value", p));
        if !sp.proof.is_empty() {
            let mut p = proof.clone();
            p.storage_proof[0].proof.pop();
            tampered.push(("storage node", p));
        }
    }
    for (what, p) in tampered {
        assert!(p.verify(root).is_err(), "{label}: tampered {what} accepted");
    }
    // The JSON we emit parses back to the same proof.
    assert_eq!(
        AccountProof::from_json(&proof.to_json()).unwrap(),
        proof,
        "{label}: JSON round trip"
    );
}

#[test]
fn execution_apis_get_proof() {
    let block = rpc_result("execution-apis/eth_getBlockByNumber/get-latest.io");
    let root = H256::from_hex(block["stateRoot"].as_str().unwrap()).unwrap();
    assert_eq!(
        root,
        H256::from_hex("0x6da8f636cdc85dbe8c1b5299e5db22f462c041febaf3b78cac1040152ee30b3b")
            .unwrap()
    );
    let dir = testdata("execution-apis/eth_getProof");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rel =
            format!("execution-apis/eth_getProof/{}", path.file_name().unwrap().to_string_lossy());
        check_proof(&rel, &rpc_result(&rel), &root);
        n += 1;
    }
    assert_eq!(n, 4, "four eth_getProof .io files are shipped");
}

#[test]
fn ethereumjs_ropsten_proofs() {
    let root = H256::from_hex("0xd487ffaf2f2838d69417f81c9d2bfca5d2e0d024ddda433bba9b8f2099eb96e5")
        .unwrap();
    for file in [
        "ropsten_validAccount.json",
        "ropsten_contractWithStorage.json",
        "ropsten_nonexistentAccount.json",
    ] {
        let v = read_json(&format!("ethereumjs-proofs/{file}"));
        let first = decode_hex(v["accountProof"][0].as_str().unwrap()).unwrap();
        assert_eq!(keccak256(&first), root, "{file}: anchored root");
        check_proof(file, &v, &root);
    }
}

#[test]
fn ethereumjs_provider_proofs() {
    let anchored: BTreeMap<&str, H256> = ["0x7a11f", "0x7a120"]
        .into_iter()
        .map(|tag| {
            let block =
                read_json(&format!("ethereumjs-proofs/providerData/blocks/block{tag}.json"));
            (tag, H256::from_hex(block["stateRoot"].as_str().unwrap()).unwrap())
        })
        .collect();
    let dir = testdata("ethereumjs-proofs/providerData/accounts");
    let (mut n, mut n_anchored) = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for (tag, result) in doc.as_object().unwrap() {
            let first = decode_hex(result["accountProof"][0].as_str().unwrap()).unwrap();
            let root = match anchored.get(tag.as_str()) {
                Some(r) => {
                    n_anchored += 1;
                    *r
                }
                None => keccak256(&first),
            };
            check_proof(&format!("{}@{tag}", path.display()), result, &root);
            n += 1;
        }
    }
    assert!(n >= 8, "only {n} provider proofs found");
    assert!(n_anchored >= 2, "only {n_anchored} anchored proofs");
}
