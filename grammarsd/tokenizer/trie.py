"""The vocabulary as a flat byte trie, the layout every mask walk uses.

Nodes are stored in depth-first preorder (children sorted by byte), so a walk is one forward loop:
descend into node ``k`` by going to ``k + 1``; skip its whole subtree by jumping to ``next[k]``.
The root is implicit (it has no byte); node arrays cover depth >= 1.

    byte      uint8 [num_nodes]     the byte on the edge into the node
    depth     int32 [num_nodes]     1 for the first byte of a token
    next      int32 [num_nodes]     first node after this node's subtree
    tok_ptr   int32 [num_nodes + 1] CSR: ids of tokens whose bytes end exactly at this node ...
    tok_ids   int32 [num_tokens]    ... are tok_ids[tok_ptr[k]:tok_ptr[k + 1]] (several ids can share bytes)

Tokens with empty bytes (special and padding ids) are not in the trie.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TokenTrie:
    byte: np.ndarray
    depth: np.ndarray
    next: np.ndarray
    tok_ptr: np.ndarray
    tok_ids: np.ndarray
    max_depth: int

    @property
    def num_nodes(self) -> int:
        return int(self.byte.shape[0])

    @classmethod
    def from_token_bytes(cls, token_bytes: Sequence[bytes]) -> TokenTrie:
        """Build the trie of every non-empty token; O(total bytes) after one sort."""
        order = sorted((b, i) for i, b in enumerate(token_bytes) if b)
        node_byte: list[int] = []
        node_depth: list[int] = []
        node_next: list[int] = []
        node_toks: list[list[int]] = []
        path: list[int] = []  # node index for each depth of the current token
        prev = b""
        for tok, tid in order:
            lcp = 0
            limit = min(len(prev), len(tok))
            while lcp < limit and prev[lcp] == tok[lcp]:
                lcp += 1
            # close the nodes on the old path that this token does not share
            for node in path[lcp:]:
                node_next[node] = len(node_byte)
            del path[lcp:]
            for d in range(lcp, len(tok)):
                path.append(len(node_byte))
                node_byte.append(tok[d])
                node_depth.append(d + 1)
                node_next.append(-1)
                node_toks.append([])
            node_toks[path[-1]].append(tid)
            prev = tok
        for node in path:
            node_next[node] = len(node_byte)
        counts = np.fromiter((len(t) for t in node_toks), dtype=np.int32, count=len(node_toks))
        tok_ptr = np.zeros(len(node_toks) + 1, dtype=np.int32)
        np.cumsum(counts, out=tok_ptr[1:])
        tok_ids = np.fromiter((t for ts in node_toks for t in ts), dtype=np.int32)
        return cls(
            byte=np.asarray(node_byte, dtype=np.uint8),
            depth=np.asarray(node_depth, dtype=np.int32),
            next=np.asarray(node_next, dtype=np.int32),
            tok_ptr=tok_ptr,
            tok_ids=tok_ids,
            max_depth=max(node_depth, default=0),
        )
