"""Typed functions as constrained tool calls: ``@grammar``, ``Tool.call`` and ``choose_tool``.

    python examples/agent_tools.py [--model tiny|smollm2]

Each tool's arguments come from its signature (typed tools) or from a regex / Lark grammar
(free-form tools); the model's output is constrained to them, validated, and the function called.
"""

from __future__ import annotations

import argparse
import datetime
from typing import Annotated, Literal

from pydantic import Field

import grammarsd as gs
from grammarsd.api.decorators import choose_tool, grammar


@grammar
def get_weather(
    city: Annotated[str, Field(description="City name", max_length=20)],
    unit: Literal["C", "F"] = "C",
) -> str:
    """Current weather for a city."""
    return f"It is 21 degrees {unit} in {city}."


@grammar
def book_flight(origin: Literal["OSL", "CDG", "JFK"], dest: Literal["OSL", "CDG", "JFK"],
                date: datetime.date) -> str:
    """Book a flight."""
    return f"Booked {origin} -> {dest} on {date:%d %b %Y}."


@grammar(lark=r'''
start: "SELECT " COLS " FROM " NAME (" LIMIT " INT)?
COLS: /[a-z_]{1,10}(, [a-z_]{1,10}){0,3}/
NAME: /[a-z_]{1,12}/
INT: /[1-9][0-9]?/
''')
def run_sql(query: str) -> str:
    """Run a read-only SQL query."""
    return f"(would run) {query}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    args = ap.parse_args()
    model = gs.load_model(args.model)
    opts = {"max_tokens": 96, "seed": 0, "temperature": 0.7}

    print("schema of get_weather:", get_weather.schema)
    print("get_weather.generate ->", get_weather.generate(model, "Weather in Oslo?", **opts))
    print("book_flight.call     ->", book_flight.call(model, "Fly me to Paris tomorrow.", **opts))
    print("run_sql.call         ->", run_sql.call(model, "List user names.", **opts))
    tools = [get_weather, book_flight, run_sql]
    call = choose_tool(model, "I need to get from Oslo to New York.", tools, **opts)
    print(f"choose_tool          -> {call.name}({call.arguments}) = {call()!r}")


if __name__ == "__main__":
    main()
