"""Structured extraction: a Pydantic model filled from free text by the default model (SmolLM2).

    python examples/extract_pydantic.py
"""

from __future__ import annotations

from pydantic import BaseModel, Field

import grammarsd as gs


class Person(BaseModel):
    name: str = Field(max_length=40)
    age: int = Field(ge=0, le=130)
    city: str = Field(max_length=40)


TEXTS = [
    "Maria Lopez is 34 years old and lives in Madrid.",
    "Born 52 years ago, Kenji Watanabe has spent his whole life in Osaka.",
]

if __name__ == "__main__":
    model = gs.load_model()
    for text in TEXTS:
        person = gs.generate(model, f"Extract the person as JSON: {text}", schema=Person,
                             json_options={"whitespace": "compact"}, max_tokens=80)
        print(repr(person))  # a validated Person instance
