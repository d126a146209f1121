"""Where the language model is: read from the environment by settings/, handed to the client in llm/."""

from __future__ import annotations

from dataclasses import dataclass, field

# The settings an operator sets to turn analysis and chat on (named in the "not configured" messages).
REQUIRED_SETTINGS = ("WOVEPAPER_LLM_API_URL", "WOVEPAPER_LLM_MODEL")
# Room for a reasoning model's reasoning in each answer's cap (WOVEPAPER_LLM_REASONING_TOKENS's default).
REASONING_TOKENS = 4_000


@dataclass(frozen=True, slots=True)
class ModelConfig:
    api_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    rps: float = 2.0
    timeout_s: float = 60.0
    # Sent as `reasoning_effort` when set ("minimal", "low", ... as the model takes them).
    reasoning_effort: str | None = None
    # Added to each request's output cap for a reasoning model (see ModelClient._body).
    reasoning_tokens: int = REASONING_TOKENS


def not_configured_message() -> str:
    return (
        "the language model is not configured: set "
        + " and ".join(REQUIRED_SETTINGS)
        + " (and WOVEPAPER_LLM_API_KEY when the endpoint needs a key)"
    )
