"""The ``grammarsd`` command line: one function per subcommand, registered on one parser.

Subcommands:

``demo``
    Load a model (default SmolLM2), apply its chat template, show the prompt's token ids with
    their exact bytes, and stream a short greedy, KV-cached continuation with load time and
    tokens/s.

To add a subcommand, write ``_add_<name>(subparsers)`` that registers its arguments and sets
``func`` to a ``(args, out) -> int`` handler, and list it in :data:`_SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import codecs
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from grammarsd.errors import GrammarsdError

Handler = Callable[[argparse.Namespace, TextIO], int]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.func
    try:
        return handler(args, sys.stdout)
    except GrammarsdError as exc:
        print(f"grammarsd: error: {exc}", file=sys.stderr)
        return 1


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grammarsd", description="Structured output and controlled decoding for LMs."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def _add_demo(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help="show exact token bytes and stream a short greedy continuation",
        description="Load a model, show the chat-formatted prompt's tokens with their exact bytes "
        "and stream a greedy continuation.",
    )
    p.add_argument("--model", default=None, help="built-in name, path or hub id (default: smollm2)")
    p.add_argument("--prompt", default="What is the capital of France?", help="user message")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens to generate (>= 1)")
    p.set_defaults(func=_run_demo)


def _run_demo(args: argparse.Namespace, out: TextIO) -> int:
    import torch

    from grammarsd.api.models import load_model

    if args.max_new_tokens < 1:
        raise SystemExit("grammarsd demo: --max-new-tokens must be >= 1")
    lm = load_model(args.model)
    info = lm.tokenizer_info
    out.write(
        f"model {lm.name!r} loaded in {lm.load_seconds:.2f} s "
        f"(logit width {info.vocab_size}, {info.kind}, eos {list(info.eos_ids)})\n"
    )

    ids = _prompt_ids(lm.tokenizer, args.prompt)
    out.write(f"prompt: {len(ids)} tokens (id: exact bytes; special tokens shown by name)\n")
    special = set(info.special_ids)
    for i in ids:
        shown = lm.tokenizer.convert_ids_to_tokens(i) if i in special else info.token_bytes[i]
        out.write(f"  {i:>6}: {shown!r}\n")

    out.write("continuation: ")
    out.flush()
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    eos = set(info.eos_ids)
    generated = 0
    start = time.perf_counter()
    with torch.inference_mode():
        step = lm.model(torch.tensor([ids], device=lm.device), use_cache=True)
        while True:
            token = int(step.logits[0, -1].argmax())
            generated += 1
            if token in eos:
                break
            out.write(text.decode(info.token_bytes[token]))
            out.flush()
            if generated == args.max_new_tokens:
                break
            step = lm.model(
                torch.tensor([[token]], device=lm.device),
                past_key_values=step.past_key_values,
                use_cache=True,
            )
    elapsed = time.perf_counter() - start
    out.write(text.decode(b"", final=True))
    rate = generated / elapsed
    out.write(
        f"\n[{generated} tokens in {elapsed:.2f} s: {rate:.1f} tokens/s, greedy, KV-cached]\n"
    )
    return 0


def _prompt_ids(tokenizer: Any, prompt: str) -> list[int]:
    """Token ids of ``prompt`` as a single user turn (chat template when the tokenizer has one)."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )
        ids: list[int] = tokenizer.encode(text, add_special_tokens=False)
        return ids
    return list(tokenizer.encode(prompt, add_special_tokens=True))


_SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (_add_demo,)
