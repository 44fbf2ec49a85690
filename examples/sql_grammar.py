"""A Lark grammar: SQL SELECT statements from the bundled ``sql_select.lark``, and the same
with an inline grammar text.

    python examples/sql_grammar.py
"""

from __future__ import annotations

import grammarsd as gs

ARITHMETIC = r"""
start: expr
?expr: term (("+" | "-") term)*
?term: NUMBER (("*" | "/") NUMBER)*
NUMBER: /[0-9]{1,6}/
"""

if __name__ == "__main__":
    model = gs.load_model()
    result = gs.generate_result(
        model, "Write an SQL query that lists the names of users older than 30.",
        grammar="sql_select.lark", max_tokens=60,
    )
    print(result.text, f"[{result.finish_reason}, {result.stats.tokens} tokens]")
    print(gs.generate(model, "Write 12 times 7 plus 5 as an arithmetic expression.",
                      grammar=ARITHMETIC, max_tokens=20))
