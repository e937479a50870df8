// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.30;

/// @title The ERC-20 token of `arbor bench evm`
/// @notice A plain ERC-20 (EIP-20): balances and allowances in mappings, `Transfer` and
/// `Approval` events, checked arithmetic. Written for Arbor's benchmark: a transfer does
/// what a mainstream token's transfer does (two balance slots read and written, one log),
/// nothing more. Storage: `totalSupply` in slot 0, `balanceOf` in slot 1 (the balance of
/// `a` at keccak256(pad32(a) ++ pad32(1))), `allowance` in slot 2.
contract BenchToken {
    string public constant name = "Arbor Bench Token";
    string public constant symbol = "ABT";
    uint8 public constant decimals = 18;

    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    error InsufficientBalance(address from, uint256 balance, uint256 value);
    error InsufficientAllowance(address spender, uint256 allowance, uint256 value);

    constructor(uint256 supply) {
        totalSupply = supply;
        balanceOf[msg.sender] = supply;
        emit Transfer(address(0), msg.sender, supply);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _move(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        if (allowed != type(uint256).max) {
            if (allowed < value) revert InsufficientAllowance(msg.sender, allowed, value);
            unchecked {
                allowance[from][msg.sender] = allowed - value;
            }
        }
        _move(from, to, value);
        return true;
    }

    function _move(address from, address to, uint256 value) private {
        uint256 balance = balanceOf[from];
        if (balance < value) revert InsufficientBalance(from, balance, value);
        unchecked {
            balanceOf[from] = balance - value;
        }
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
