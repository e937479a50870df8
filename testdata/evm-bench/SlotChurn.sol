// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.30;

/// @title The storage-heavy contract of `arbor bench evm`
/// @notice Each call writes `fresh` slots that did not exist (keys `freshFrom` onwards, each
/// set to its key plus one) and rewrites `existing` slots that do (keys `existingFrom`
/// onwards, each incremented): a block of such calls is mostly storage writes, half of
/// them growing the contract's storage trie; every call also counts itself in `calls`
/// (one slot all calls write, as a pool's reserves are). Storage: `slots` in slot 0 (key `k` at
/// keccak256(pad32(k) ++ pad32(0))), `calls` in slot 1.
contract SlotChurn {
    mapping(uint256 => uint256) public slots;
    uint256 public calls;

    event Churned(address indexed caller, uint256 freshFrom, uint256 existingFrom);

    function churn(uint256 freshFrom, uint256 fresh, uint256 existingFrom, uint256 existing)
        external
    {
        for (uint256 i = 0; i < fresh; ++i) {
            slots[freshFrom + i] = freshFrom + i + 1;
        }
        for (uint256 i = 0; i < existing; ++i) {
            slots[existingFrom + i] += 1;
        }
        calls += 1;
        emit Churned(msg.sender, freshFrom, existingFrom);
    }
}
