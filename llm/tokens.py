"""Token counts estimated from text, for budgets decided before a request (prompts, history, quotas).

Servers count with their own tokenizer, which differs per model; four characters a token is the usual
rule of thumb for English and errs on the high side for the TeX-heavy text of abstracts. Usage a server
reports always wins over these estimates.
"""

from __future__ import annotations

from collections.abc import Iterable

CHARS_PER_TOKEN = 4
# Role markers and separators the chat template adds around each message.
MESSAGE_OVERHEAD = 4


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def estimate_prompt_tokens(contents: Iterable[str]) -> int:
    return sum(estimate_tokens(c) + MESSAGE_OVERHEAD for c in contents)
