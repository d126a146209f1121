"""Settings from the environment: DATABASE_URL, REDIS_URL and WOVEPAPER_*."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from edge.identity import parse_networks


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
    # Query cost, checked before any SQL (README, "The public edge").
    max_nodes: int = Field(50_000, ge=1)
    max_cost: int = Field(5000, ge=1)
    pool_min_size: int = Field(2, ge=1)
    pool_max_size: int = Field(10, ge=1)
    # Proxies whose X-Forwarded-For is believed (comma-separated addresses or CIDR networks).
    trusted_proxies: str = ""

    # The public edge (README, "The public edge").
    rate_limits: Literal["on", "off"] = "on"
    anon_points_per_hour: int = Field(1000, ge=1)
    key_points_per_hour: int = Field(5000, ge=1)
    trusted_documents: Literal["off", "site", "only"] = "site"
    cdn_max_age_s: int = Field(60, ge=0)
    cdn_stale_while_revalidate_s: int = Field(600, ge=0)
    purge_url: str | None = None
    cors_origins: str = ""
    graphiql: bool = True
    introspection: bool = True

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

    # Where `make run` / `make test` keep project-local servers when no URL is set.
    local_dir: str = ".wovepaper"

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, v: str) -> str:
        parse_networks(v.split(","))
        return v

    @field_validator("purge_url")
    @classmethod
    def _purge_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return v

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, v: str) -> str:
        for origin in cors_origin_list(v):
            if origin != "*" and not origin.startswith(("http://", "https://")):
                raise ValueError(f"{origin!r} is not an origin (scheme://host[:port])")
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

    @field_validator("arxiv_oai_url", "s2_api_url", "openalex_api_url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return v.rstrip("/")


def cors_origin_list(spec: str) -> list[str]:
    return [o.strip().rstrip("/") for o in spec.split(",") if o.strip()]


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
