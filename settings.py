"""Settings from the environment: DATABASE_URL, REDIS_URL and WOVEPAPER_*."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from edge.identity import parse_networks
from llm.config import ModelConfig


class SettingsError(Exception):
    """A malformed environment variable, named in one line."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WOVEPAPER_", extra="ignore", frozen=True)

    database_url: Annotated[str | None, Field(validation_alias=AliasChoices("DATABASE_URL"))] = None
    redis_url: Annotated[str | None, Field(validation_alias=AliasChoices("REDIS_URL"))] = None

    # Request limits (see README, "Limits").
    statement_timeout_ms: int = Field(5000, ge=100)
    operation_timeout_s: float = Field(10.0, gt=0)
    max_body_bytes: int = Field(1_000_000, ge=1024)
    max_depth: int = Field(10, ge=2)
    max_aliases: int = Field(15, ge=1)
    max_tokens: int = Field(2000, ge=100)
    pool_min_size: int = Field(2, ge=1)
    pool_max_size: int = Field(10, ge=1)
    # Proxies whose X-Forwarded-For is believed (comma-separated addresses or CIDR networks).
    trusted_proxies: str = ""

    # Semantic and hybrid search (needs the `semantic` extra and pgvector); false answers SEMANTIC_UNAVAILABLE.
    semantic_search: bool = True
    # Load the embedding model when the server starts (in the background), not on the first semantic request.
    semantic_preload: bool = True

    # Cache.
    cache_namespace: str = Field("wp", pattern=r"^[a-z0-9_-]{1,32}$")
    cache_ttl_s: int = Field(3600, ge=1)
    redis_timeout_s: float = Field(0.25, gt=0)

    # Upstreams.
    arxiv_oai_url: str = "https://oaipmh.arxiv.org/oai"
    arxiv_delay_s: float = Field(3.0, ge=0)
    s2_api_url: str = "https://api.semanticscholar.org/graph/v1"
    s2_api_key: str | None = None
    s2_rps: float = Field(1.0, gt=0)
    openalex_api_url: str = "https://api.openalex.org"
    openalex_api_key: str | None = None
    openalex_mailto: str | None = None
    openalex_rps: float = Field(10.0, gt=0)

    # The language model behind `ingest analyse` and chat: any OpenAI-compatible endpoint (a hosted provider,
    # vLLM, llama.cpp, Ollama). Without a URL and a model, analysis and chat are off and the rest works.
    llm_api_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_model: str | None = None
    llm_rps: float = Field(2.0, gt=0)
    llm_timeout_s: float = Field(60.0, gt=0)
    # Tokens `ingest analyse` may spend per UTC day (0: no limit).
    llm_daily_tokens: int = Field(1_000_000, ge=0)
    # Questions each signed-in reader may ask per UTC day.
    chat_daily_messages: int = Field(50, ge=0)

    # Where `make run` / `make test` keep project-local servers when no URL is set.
    local_dir: str = ".wovepaper"

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, v: str) -> str:
        parse_networks(v.split(","))
        return v

    @field_validator("database_url")
    @classmethod
    def _postgres_scheme(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("postgresql://", "postgres://")):
            raise ValueError("must start with postgresql://")
        return v

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return v

    @field_validator("arxiv_oai_url", "s2_api_url", "openalex_api_url", "llm_api_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is None:
            return None
        if not v.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return v.rstrip("/")

    @field_validator("llm_model", "llm_api_url")
    @classmethod
    def _blank_is_unset(cls, v: str | None) -> str | None:
        return v.strip() or None if v is not None else None

    @property
    def llm(self) -> ModelConfig | None:
        """The model endpoint, or None when analysis and chat are not configured."""
        if not self.llm_api_url or not self.llm_model:
            return None
        key = self.llm_api_key.get_secret_value() if self.llm_api_key is not None else None
        return ModelConfig(
            self.llm_api_url, self.llm_model, api_key=key or None, rps=self.llm_rps, timeout_s=self.llm_timeout_s
        )


def _env_name(loc: tuple[int | str, ...]) -> str:
    field = str(loc[0]) if loc else "?"
    if field in ("database_url", "DATABASE_URL"):
        return "DATABASE_URL"
    if field in ("redis_url", "REDIS_URL"):
        return "REDIS_URL"
    return f"WOVEPAPER_{field.upper()}"


def load_settings() -> Settings:
    """Read the environment; raise SettingsError naming the first malformed variable."""
    try:
        return Settings()
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise SettingsError(f"{_env_name(err['loc'])} is malformed: {msg}") from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
