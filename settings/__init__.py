"""Settings from the environment: DATABASE_URL, REDIS_URL and WOVEPAPER_*, each described in docs/configuration.md."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from request_types.identity import parse_networks
from settings.language_model import REASONING_TOKENS, ModelConfig
from settings.redis_target import RedisTarget, parse_sentinels

# Written into feeds and links as is: a scheme, a host and a path, nothing that needs escaping.
_PUBLIC_URL = re.compile(r"^https?://[A-Za-z0-9.-]+(?::\d{1,5})?(?:/[A-Za-z0-9._~/-]*)?$")


class SettingsError(Exception):
    """A malformed environment variable, named in one line."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WOVEPAPER_", extra="ignore", frozen=True)

    database_url: Annotated[str | None, Field(validation_alias=AliasChoices("DATABASE_URL"))] = None
    redis_url: Annotated[str | None, Field(validation_alias=AliasChoices("REDIS_URL"))] = None
    # Redis beyond one server (docs/redis.md): Sentinels (`host:port,...`) and the name of the primary
    # they watch, with a password of their own if they have one; or a Cluster, `REDIS_URL` naming any node.
    redis_sentinels: str | None = None
    redis_sentinel_master: str | None = None
    redis_sentinel_password: SecretStr | None = None
    redis_cluster: bool = False

    # Request limits (docs/partners/edge.md, "Document limits" and "Bounded requests and memory").
    statement_timeout_ms: int = Field(5000, ge=100)
    operation_timeout_s: float = Field(10.0, gt=0)
    max_body_bytes: int = Field(1_000_000, ge=1024)
    max_header_bytes: int = Field(65_536, ge=8192)
    header_timeout_s: float = Field(10.0, gt=0)
    body_timeout_s: float = Field(10.0, gt=0)
    max_depth: int = Field(10, ge=2)
    max_aliases: int = Field(15, ge=1)
    max_tokens: int = Field(2000, ge=100)
    # Query cost, checked before any SQL (docs/partners/edge.md, "Query cost").
    max_nodes: int = Field(50_000, ge=1)
    max_cost: int = Field(5000, ge=1)
    pool_min_size: int = Field(2, ge=1)
    pool_max_size: int = Field(10, ge=1)
    # Connections one request may hold at once (its other reads wait for them), and the longest wait for a free
    # connection before answering OVERLOADED (503).
    pool_max_per_request: int = Field(3, ge=1)
    pool_acquire_timeout_s: float = Field(3.0, gt=0)
    # Hot standbys queries read from (comma-separated DSNs; empty: none). Kept as text: a replica whose DSN does not
    # parse is left out with a log line naming this setting, and the API still serves (`replica_dsns`).
    database_replica_urls: str = ""
    # A replica further behind the primary than this leaves the rotation until it catches up. At most 60 s: the
    # invalidations' WAL positions are kept in Redis for twice that (db/cache/positions.py).
    replica_max_lag_s: float = Field(10.0, ge=1, le=60)
    # How long a writer's reads are held to their own writes (on the primary, or a replica that has replayed them).
    read_your_writes_s: float = Field(30.0, gt=0, le=86_400)
    # Proxies whose X-Forwarded-For is believed (comma-separated addresses or CIDR networks). Loopback by default: a
    # proxy on the same host (what uvicorn itself trusts by default; `serve` leaves proxy headers to the edge).
    trusted_proxies: str = "127.0.0.1,::1"

    # The public edge (docs/partners/edge.md).
    rate_limits: Literal["on", "off"] = "on"
    anon_points_per_hour: int = Field(1000, ge=1)
    key_points_per_hour: int = Field(5000, ge=1)
    failed_auth_per_hour: int = Field(100, ge=1)
    trusted_documents: Literal["off", "site", "only"] = "site"
    cdn_max_age_s: int = Field(60, ge=0)
    cdn_stale_while_revalidate_s: int = Field(600, ge=0)
    purge_url: str | None = None
    # Sent to the purge hook as `Authorization: Bearer`, so that it can refuse anyone else's purges.
    purge_token: SecretStr | None = None
    cors_origins: str = ""
    graphiql: bool = True
    introspection: bool = True
    # Graceful shutdown: after SIGTERM, serve this long with /readyz failing (so load balancers move away),
    # then stop accepting and give in-flight requests at most shutdown_grace_s.
    shutdown_drain_s: float = Field(5.0, ge=0)
    shutdown_grace_s: float = Field(20.0, gt=0)
    # How long an idle keep-alive connection stays open. Behind a proxy that keeps idle connections to the API, set
    # it above the proxy's own idle timeout: otherwise the API may close a connection just as the proxy sends on it.
    keep_alive_s: float = Field(5.0, gt=0, le=3600)
    # The two fast paths, each on private internals of a pinned library, each with a way out should an upgrade break
    # them: graphql-core's executor with plain fields read straight off their source (schema/fast_executor/; off:
    # Strawberry's own execution), and uvicorn's HTTP protocol answering from memory before the ASGI exchange
    # (edge/protocol.py; off: uvicorn's stock httptools protocol, which also leaves the request head's size and
    # arrival time unbounded by the server, so a proxy in front should bound them).
    fast_executor: bool = True
    edge_protocol: bool = True
    # Worker processes `wovepaper serve` starts unless --workers says otherwise (a container sets it).
    workers: int = Field(1, ge=1, le=64)
    # Logs: one JSON object per line (`json`) or plain text (`text`).
    log_format: str = Field("json", pattern=r"^(json|text)$")
    # OpenTelemetry traces (needs the `otel` extra); exported over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT.
    otel_enabled: bool = False
    otel_service_name: str = "wovepaper-api"

    # Semantic and hybrid search (needs the `semantic` extra and pgvector); false answers SEMANTIC_UNAVAILABLE.
    semantic_search: bool = True
    # Load the embedding model when the server starts (in the background), not on the first semantic request.
    semantic_preload: bool = True
    # How the embedding model runs: `onnx` (ONNX Runtime, graphs exported from the bundled model on first use) or
    # `torch` (the reference, on PyTorch); and where the exported graphs are kept (unset: ~/.cache/wovepaper/models).
    embedding_backend: Literal["onnx", "torch"] = "onnx"
    model_dir: str | None = None

    # Signed-in readers: the site's `Authorization: Bearer <JWT>`, HS256 with a shared secret and/or RS256/ES256
    # with keys from a JWKS (a URL, fetched and cached, or a file). Issuer and audience are checked when set.
    jwt_secret: SecretStr | None = None
    jwks_url: str | None = None
    jwks_file: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    # The claim of a verified token holding the reader's ORCID iD (ORCID's own sign-in puts it in `sub`); empty: none.
    jwt_orcid_claim: str = Field("orcid", max_length=200)
    # Researchers and institutions one reader may follow, together.
    max_follows: int = Field(5000, ge=1)
    # Corrections: per reader, at most this many waiting for an operator, and this many asked per UTC day.
    corrections_pending_max: int = Field(20, ge=1)
    corrections_daily_max: int = Field(50, ge=1)

    # Feeds: entry links point at the site; the feeds' own URLs (self links, `Viewer.feedUrl`) at where the API's
    # /rss and /atom paths are served, the site's host unless set.
    site_url: str = "https://www.wovepaper.com"
    feeds_url: str | None = None

    # Cache.
    cache_namespace: str = Field("wp", pattern=r"^[a-z0-9_-]{1,32}$")
    cache_ttl_s: int = Field(3600, ge=1)
    # Whole responses each worker holds in memory in front of Redis (0: none), and how long it may hold one.
    near_cache_mb: int = Field(64, ge=0)
    near_cache_max_age_s: float = Field(10.0, gt=0)
    redis_timeout_s: float = Field(0.25, gt=0)
    # redis-py connections per process; callers wait at most redis_timeout_s for one.
    redis_max_connections: int = Field(16, ge=2)
    # The Redis breaker's window is the last redis_breaker_window_calls calls that ended within
    # redis_breaker_window_s seconds; it opens when the window holds at least redis_breaker_min_calls and
    # redis_breaker_failure_rate of them failed; it probes every redis_breaker_reset_s seconds.
    redis_breaker_failure_rate: float = Field(0.5, gt=0, le=1)
    redis_breaker_min_calls: int = Field(10, ge=1)
    redis_breaker_window_calls: int = Field(20, ge=1)
    redis_breaker_window_s: float = Field(10.0, gt=0)
    redis_breaker_reset_s: float = Field(10.0, gt=0)

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
    # Ingest connections: no statement, lock wait or open transaction may last for ever.
    ingest_statement_timeout_ms: int = Field(300_000, ge=1000)
    ingest_lock_timeout_ms: int = Field(60_000, ge=100)
    ingest_idle_timeout_ms: int = Field(600_000, ge=1000)
    # The share of the time the harvest and the enrichment may keep PostgreSQL writing (ingest/pacing.py): 1 writes
    # as fast as it can; less bounds the ingest's own writes on a host the API shares.
    ingest_share: float = Field(1.0, gt=0, le=1)
    # The longest the harvest and the enrichment wait, before a write, while an API process says the site is
    # strained (db/cache/strain.py; through the cache's Redis); 0 never waits.
    ingest_yield_s: float = Field(30.0, ge=0)
    # The CPU priority the batch commands (`ingest ...`, `embed`) lower themselves to (nice, 0-19): on a host the API
    # shares, the scheduler gives the API and PostgreSQL the cores first; alone on a host it changes nothing.
    ingest_nice: int = Field(10, ge=0, le=19)

    # The language model behind `ingest analyse` and chat: any OpenAI-compatible endpoint (a hosted provider,
    # vLLM, llama.cpp, Ollama). Without a URL and a model, analysis and chat are off and the rest works.
    llm_api_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_model: str | None = None
    llm_rps: float = Field(2.0, gt=0)
    llm_timeout_s: float = Field(60.0, gt=0)
    # For reasoning models: `reasoning_effort` to send (unset: none, the model's default), and the tokens added to
    # each answer's cap for its reasoning (when the effort is set, or the endpoint takes `max_completion_tokens`).
    llm_reasoning_effort: str | None = None
    llm_reasoning_tokens: int = Field(REASONING_TOKENS, ge=0)
    # Tokens `ingest analyse` may spend per UTC day (0: no limit).
    llm_daily_tokens: int = Field(1_000_000, ge=0)
    # Questions each signed-in reader may ask per UTC day.
    chat_daily_messages: int = Field(50, ge=0)

    # Where `make run` / `make test` keep project-local servers when no URL is set.
    local_dir: str = ".wovepaper"

    @model_validator(mode="after")
    def _breaker_window(self) -> Settings:
        if self.redis_breaker_min_calls > self.redis_breaker_window_calls:
            raise ValueError("WOVEPAPER_REDIS_BREAKER_MIN_CALLS must not exceed WOVEPAPER_REDIS_BREAKER_WINDOW_CALLS")
        return self

    @model_validator(mode="after")
    def _redis_topology(self) -> Settings:
        if self.redis_sentinels and not self.redis_sentinel_master:
            raise ValueError("WOVEPAPER_REDIS_SENTINELS needs WOVEPAPER_REDIS_SENTINEL_MASTER (the primary's name)")
        if self.redis_sentinel_master and not self.redis_sentinels:
            raise ValueError("WOVEPAPER_REDIS_SENTINEL_MASTER needs WOVEPAPER_REDIS_SENTINELS (host:port,...)")
        if self.redis_cluster and self.redis_sentinels:
            raise ValueError("WOVEPAPER_REDIS_CLUSTER and WOVEPAPER_REDIS_SENTINELS are two topologies: set one")
        if self.redis_cluster and not self.redis_url:
            raise ValueError("WOVEPAPER_REDIS_CLUSTER needs REDIS_URL naming any node of the cluster")
        if (self.redis_cluster or self.redis_sentinels) and self.redis_url and self.redis_url.startswith("unix://"):
            raise ValueError("REDIS_URL must be redis:// or rediss:// for a cluster or Sentinel")
        return self

    @model_validator(mode="after")
    def _writers_outlast_lag(self) -> Settings:
        # Once a writer's hold ends, any replica in the rotation is at most the maximum lag behind: it must have the
        # write by then, or the writer would see it vanish.
        if self.read_your_writes_s < self.replica_max_lag_s:
            raise ValueError(
                f"WOVEPAPER_READ_YOUR_WRITES_S ({self.read_your_writes_s:g}) must be at least "
                f"WOVEPAPER_REPLICA_MAX_LAG_S ({self.replica_max_lag_s:g})"
            )
        return self

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinel_list(cls, v: str | None) -> str | None:
        if v is not None and v.strip():
            parse_sentinels(v)
            return v
        return None

    @property
    def redis(self) -> RedisTarget | None:
        """Where Redis is, or None: no Redis (the API answers from PostgreSQL alone)."""
        password = self.redis_sentinel_password.get_secret_value() if self.redis_sentinel_password else None
        if self.redis_sentinels:
            return RedisTarget(
                url=self.redis_url,
                sentinels=parse_sentinels(self.redis_sentinels),
                sentinel_master=self.redis_sentinel_master,
                sentinel_password=password or None,
            )
        if not self.redis_url:
            return None
        return RedisTarget(url=self.redis_url, cluster=self.redis_cluster)

    @property
    def replica_dsns(self) -> list[str]:
        """The replica DSNs as given (checked when the server starts, not here: see database_replica_urls)."""
        return split_dsns(self.database_replica_urls)

    @field_validator("embedding_backend", mode="before")
    @classmethod
    def _backend_name(cls, v: object) -> object:
        return (v.strip().lower() or "onnx") if isinstance(v, str) else v

    @field_validator("model_dir")
    @classmethod
    def _blank_dir_is_unset(cls, v: str | None) -> str | None:
        return v if v and v.strip() else None

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
            self.llm_api_url,
            self.llm_model,
            api_key=key or None,
            rps=self.llm_rps,
            timeout_s=self.llm_timeout_s,
            reasoning_effort=self.llm_reasoning_effort or None,
            reasoning_tokens=self.llm_reasoning_tokens,
        )

    @field_validator("jwks_url")
    @classmethod
    def _jwks_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return v


def masked_url(url: str) -> str:
    """A server URL fit to print: its password (in the user part or a `password=` parameter) replaced by `***`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        userinfo, _, hostport = authority.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        authority = f"{user}{':***' if colon else ''}@{hostport}"
    tail = re.sub(r"(?i)([?&]password=)[^&]*", r"\1***", tail)
    return f"{scheme}{sep}{authority}{slash}{tail}"


# A DSN may name several hosts itself (`postgresql://a:5432,b:5432/db`): the list splits only before a scheme.
_NEXT_DSN = re.compile(r",\s*(?=[A-Za-z][A-Za-z0-9+.-]*://)")


def split_dsns(spec: str) -> list[str]:
    return [d.strip(" ,") for d in _NEXT_DSN.split(spec) if d.strip(" ,")]


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
        name, msg = _problems(exc)[0]
        if not name:
            raise SettingsError(msg) from None  # a rule across variables, which its message names
        raise SettingsError(f"{name} is malformed: {msg}") from None


def settings_problems() -> list[tuple[str, str]]:
    """Every malformed variable of the environment, with what is wrong with it (`wovepaper check`); a rule across
    variables has no name."""
    try:
        Settings()
    except ValidationError as exc:
        return _problems(exc)
    return []


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    return [
        (_env_name(err["loc"]) if err["loc"] else "", str(err["msg"]).removeprefix("Value error, "))
        for err in exc.errors()
    ]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
