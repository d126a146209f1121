"""OpenTelemetry traces, when `WOVEPAPER_OTEL_ENABLED=true` and the `otel` extra is installed: a span per
request (Starlette), per SQL statement (asyncpg) and per upstream call (httpx), exported over OTLP/HTTP to
`OTEL_EXPORTER_OTLP_ENDPOINT` (the SDK's own variables apply). Off by default: tracing costs CPU per span.

Instrumentations are process-wide (they patch asyncpg and httpx), so they are installed once per process.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.applications import Starlette

log = logging.getLogger(__name__)

_installed: dict[str, Any] = {}


class TracingUnavailable(Exception):
    """The `otel` extra is not installed."""


def tracer_provider(service_name: str, exporter: Any | None = None) -> Any:
    """A provider exporting to `exporter` (the OTLP/HTTP one when None)."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as exc:
        raise TracingUnavailable("WOVEPAPER_OTEL_ENABLED needs the otel extra: pip install '.[otel]'") from exc
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def instrument(app: Starlette, *, service_name: str, provider: Any | None = None) -> None:
    """Trace `app`'s requests, and asyncpg and httpx calls process-wide, with `provider` (an OTLP one when None)."""
    provider = provider or _installed.get("provider") or tracer_provider(service_name)
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.starlette import StarletteInstrumentor

    StarletteInstrumentor.instrument_app(app, tracer_provider=provider)
    if "provider" not in _installed:
        AsyncPGInstrumentor().instrument(tracer_provider=provider)  # type: ignore[no-untyped-call]
        HTTPXClientInstrumentor().instrument(tracer_provider=provider)
        _installed["provider"] = provider
        log.info("OpenTelemetry tracing on (service %s)", service_name)


def uninstrument() -> None:
    """Undo the process-wide instrumentation (tests)."""
    if _installed.pop("provider", None) is None:
        return
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    AsyncPGInstrumentor().uninstrument()  # type: ignore[no-untyped-call]
    HTTPXClientInstrumentor().uninstrument()
