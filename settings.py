"""Settings from the environment: DATABASE_URL, REDIS_URL and WOVEPAPER_*."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from edge.identity import parse_networks

# Written into feeds and links as is: a scheme, a host and a path, nothing that needs escaping.
_PUBLIC_URL = re.compile(r"^https?://[A-Za-z0-9.-]+(?::\d{1,5})?(?:/[A-Za-z0-9._~/-]*)?$")


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

    # Signed-in readers: the site's `Authorization: Bearer <JWT>`, HS256 with a shared secret and/or RS256/ES256
    # with keys from a JWKS (a URL, fetched and cached, or a file). Issuer and audience are checked when set.
    jwt_secret: SecretStr | None = None
    jwks_url: str | None = None
    jwks_file: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    # Researchers and institutions one reader may follow, together.
    max_follows: int = Field(5000, ge=1)

    # Feeds: entry links point at the site; the feeds' own URLs (self links, `Viewer.feedUrl`) at where the API's
    # /rss and /atom paths are served, the site's host unless set.
    site_url: str = "https://www.wovepaper.com"
    feeds_url: str | None = None

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

    @field_validator("jwt_secret")
    @classmethod
    def _secret_length(cls, v: SecretStr | None) -> SecretStr | None:
        # HS256 keys shorter than the hash (RFC 7518 3.2) are refused; PyJWT would only warn.
        if v is not None and len(v.get_secret_value().encode()) < 32:
            raise ValueError("must be at least 32 bytes")
        return v

    @field_validator("jwks_file")
    @classmethod
    def _readable_file(cls, v: str | None) -> str | None:
        if v is not None and not Path(v).is_file():
            raise ValueError(f"no such file: {v}")
        return v

    @field_validator("site_url", "feeds_url")
    @classmethod
    def _public_url(cls, v: str | None) -> str | None:
        if v is not None and not _PUBLIC_URL.match(v):
            raise ValueError("must be an http(s) URL")
        return v.rstrip("/") if v is not None else None

    @property
    def feeds_base_url(self) -> str:
        return self.feeds_url or self.site_url

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

    @field_validator("jwks_url")
    @classmethod
    def _jwks_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return v


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
