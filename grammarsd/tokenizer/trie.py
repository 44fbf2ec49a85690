"""The vocabulary as a flat byte trie, the layout every mask walk uses.

Nodes are stored in depth-first preorder (children sorted by byte), so a walk is one forward loop:
descend into node ``k`` by going to ``k + 1``; skip its whole subtree by jumping to ``next[k]``.
The root is implicit (it has no byte); node arrays cover depth >= 1.

    byte      uint8 [num_nodes]     the byte on the edge into the node
    depth     int32 [num_nodes]     1 for the first byte of a token
    next      int32 [num_nodes]     first node after this node's subtree
    tok_ptr   int32 [num_nodes + 1] CSR: ids of tokens whose bytes end exactly at this node ...
    tok_ids   int32 [num_tokens]    ... are tok_ids[tok_ptr[k]:tok_ptr[k + 1]] (several ids can share bytes)
    below     uint64 [num_nodes, 4] the 256-bit set of bytes on the edges strictly below the node
    below_utf8 uint8 [num_nodes]    1 iff every path below the node, read from a character boundary,
                                    is a prefix of well-formed UTF-8 (``UTF8_DFA`` stays alive)
    height    uint16 [num_nodes]    bytes on the longest path strictly below the node (0 for a leaf),
                                    saturated at ``HEIGHT_MAX`` (a true height may be larger there)
    tok_lcp   int32 [num_tokens]    bytes token tok_ids[j] shares with tok_ids[j - 1] (0 for j = 0)
    tok_bits  uint32 [W]            the ids in the trie as a bitset (bit t & 31 of word t >> 5)
    seq_ptr   int64 [num_tokens + 1] CSR: the bytes of token tok_ids[j] are ...
    seq_data  uint8 [total bytes]   ... seq_data[seq_ptr[j]:seq_ptr[j + 1]] (token bytes in trie
                                    order: a walk over trie positions reads them sequentially)

Tokens with empty bytes (special and padding ids) are not in the trie. Because of the preorder, the
ids of every token in node ``k``'s subtree (``k`` included) are ``tok_ids[tok_ptr[k]:tok_ptr[next[k]]]``,
in byte order. ``below``, ``below_utf8`` and ``height`` let a walk take a whole subtree at once: if
an automaton stays alive on every string of at most ``height`` bytes that the subtree's byte sets
allow (see ``matcher._kernels.classify_tokens``), no node below needs a visit. They cost 35 bytes per
node (~9.6 MB for Llama-3's 275k nodes), once per tokenizer. ``tok_lcp`` gives the common prefix of
consecutive tokens of any id range without reading token bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

UTF8_BOUNDARY = 0  # UTF8_DFA state between characters
UTF8_STATES = 8
HEIGHT_MAX = 0xFFFF  # ``height`` saturates here (uint16)


def _utf8_dfa() -> np.ndarray:
    """Well-formed UTF-8 (Unicode Table 3-7) as int8 [8, 256]; -1 = dead, state 0 = boundary.

    1: one continuation byte left; 2: two left; 3: after E0 (A0-BF next); 4: after ED (80-9F next,
    no surrogates); 5: three left; 6: after F0 (90-BF next); 7: after F4 (80-8F next).
    """
    t = np.full((UTF8_STATES, 256), -1, dtype=np.int8)
    t[0, 0x00:0x80] = 0
    t[0, 0xC2:0xE0] = 1
    t[0, 0xE0] = 3
    t[0, 0xE1:0xED] = 2
    t[0, 0xED] = 4
    t[0, 0xEE:0xF0] = 2
    t[0, 0xF0] = 6
    t[0, 0xF1:0xF4] = 5
    t[0, 0xF4] = 7
    for state, lo, hi, to in ((1, 0x80, 0xC0, 0), (2, 0x80, 0xC0, 1), (3, 0xA0, 0xC0, 1),
                              (4, 0x80, 0xA0, 1), (5, 0x80, 0xC0, 2), (6, 0x90, 0xC0, 2),
                              (7, 0x80, 0x90, 2)):  # fmt: skip
        t[state, lo:hi] = to
    t.setflags(write=False)
    return t


UTF8_DFA = _utf8_dfa()


def _subtree_summaries(
    byte: np.ndarray, depth: np.ndarray, parent: np.ndarray, max_depth: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``below``, ``below_utf8`` and ``height`` (see the module docstring), one vectorised pass per
    depth from the deepest level up: a node's summaries come from its children's."""
    n = byte.shape[0]
    height = np.zeros(n, dtype=np.int64)
    below = np.zeros((n, 4), dtype=np.uint64)
    own = np.zeros((n, 4), dtype=np.uint64)  # the node's own edge byte as a set
    own[np.arange(n), byte >> 6] = np.uint64(1) << (byte & 63).astype(np.uint64)
    # bit u of safe[k]: every path strictly below k stays alive in UTF8_DFA from state u
    safe = np.full(n, (1 << UTF8_STATES) - 1, dtype=np.int64)
    for d in range(max_depth, 1, -1):
        kids = np.nonzero(depth == d)[0]
        up = parent[kids]
        np.bitwise_or.at(below, up, below[kids] | own[kids])
        np.maximum.at(height, up, height[kids] + 1)
        enter = np.zeros(kids.shape[0], dtype=np.int64)  # bit u: kid's edge then its paths, from u
        for u in range(UTF8_STATES):
            to = UTF8_DFA[u, byte[kids]].astype(np.int64)
            alive = (to >= 0) & ((safe[kids] >> np.maximum(to, 0)) & 1 == 1)
            enter |= alive.astype(np.int64) << u
        np.bitwise_and.at(safe, up, enter)
    below_utf8 = ((safe >> UTF8_BOUNDARY) & 1).astype(np.uint8)
    return below, below_utf8, np.minimum(height, HEIGHT_MAX).astype(np.uint16)


@dataclass(frozen=True)
class TokenTrie:
    byte: np.ndarray
    depth: np.ndarray
    next: np.ndarray
    tok_ptr: np.ndarray
    tok_ids: np.ndarray
    max_depth: int
    below: np.ndarray
    below_utf8: np.ndarray
    height: np.ndarray
    tok_lcp: np.ndarray
    tok_bits: np.ndarray
    seq_ptr: np.ndarray
    seq_data: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.byte.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes held by the trie's arrays."""
        arrays = (self.byte, self.depth, self.next, self.tok_ptr, self.tok_ids, self.below,
                  self.below_utf8, self.height, self.tok_lcp, self.tok_bits, self.seq_ptr,
                  self.seq_data)  # fmt: skip
        return sum(a.nbytes for a in arrays)

    @classmethod
    def from_token_bytes(cls, token_bytes: Sequence[bytes]) -> TokenTrie:
        """Build the trie of every non-empty token; O(total bytes) after one sort."""
        order = sorted((b, i) for i, b in enumerate(token_bytes) if b)
        node_byte: list[int] = []
        node_depth: list[int] = []
        node_next: list[int] = []
        node_toks: list[list[int]] = []
        node_parent: list[int] = []  # -1 for depth 1
        path: list[int] = []  # node index for each depth of the current token
        lcp_of = np.zeros(len(token_bytes), dtype=np.int32)  # by id: shared with the previous
        prev = b""
        for tok, tid in order:
            lcp = 0
            limit = min(len(prev), len(tok))
            while lcp < limit and prev[lcp] == tok[lcp]:
                lcp += 1
            lcp_of[tid] = lcp
            # close the nodes on the old path that this token does not share
            for node in path[lcp:]:
                node_next[node] = len(node_byte)
            del path[lcp:]
            for d in range(lcp, len(tok)):
                node_parent.append(path[-1] if path else -1)
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
        byte = np.asarray(node_byte, dtype=np.uint8)
        depth = np.asarray(node_depth, dtype=np.int32)
        max_depth = max(node_depth, default=0)
        below, below_utf8, height = _subtree_summaries(
            byte, depth, np.asarray(node_parent, dtype=np.int64), max_depth
        )
        in_trie = np.zeros(-(-len(token_bytes) // 32) * 32, dtype=bool)
        in_trie[tok_ids] = True
        seq_ptr = np.zeros(len(order) + 1, dtype=np.int64)
        np.cumsum([len(b) for b, _ in order], out=seq_ptr[1:])
        return cls(
            byte=byte,
            depth=depth,
            next=np.asarray(node_next, dtype=np.int32),
            tok_ptr=tok_ptr,
            tok_ids=tok_ids,
            max_depth=max_depth,
            below=below,
            below_utf8=below_utf8,
            height=height,
            tok_lcp=lcp_of[tok_ids],  # tok_ids is in byte order: the order lcps were taken in
            tok_bits=np.packbits(in_trie, bitorder="little").view(np.uint32),
            seq_ptr=seq_ptr,
            seq_data=np.frombuffer(b"".join(b for b, _ in order), dtype=np.uint8),
        )
