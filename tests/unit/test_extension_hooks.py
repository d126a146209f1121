"""The extension hooks found once per class (schema/extension_hooks.py) are Strawberry's, stage for stage."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from strawberry.extensions import SchemaExtension
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.types import ExecutionContext

from schema.extension_hooks import ExtensionsRunner
from schema.extensions import default_extensions
from settings import Settings

STAGES = ("operation", "validation", "parsing", "executing")


class _Plain(SchemaExtension):
    """Hooks of the other forms: a plain function and a coroutine function."""

    def on_parse(self) -> None:  # type: ignore[override]
        self.log.append("parse")

    async def on_execute(self) -> None:  # type: ignore[override]
        self.log.append("execute")

    def __init__(self) -> None:
        self.log: list[str] = []


class _Generators(SchemaExtension):
    def __init__(self) -> None:
        self.log: list[str] = []

    def on_operation(self) -> Iterator[None]:
        self.log.append("operation in")
        yield
        self.log.append("operation out")

    async def on_execute(self) -> AsyncIterator[None]:
        self.log.append("execute in")
        yield
        self.log.append("execute out")


def _extensions() -> list[SchemaExtension]:
    return [make() for make in default_extensions(Settings())] + [_Plain(), _Generators()]


def test_each_stage_finds_the_hooks_strawberry_finds() -> None:
    for _ in range(2):  # the second time from what the first found
        extensions = _extensions()
        context = ExecutionContext(query="{ __typename }", schema=None, allowed_operations=())  # type: ignore[arg-type]
        ours, theirs = ExtensionsRunner(context, extensions), SchemaExtensionsRunner(context, extensions)
        for stage in STAGES:
            found, expected = getattr(ours, stage)().hooks, getattr(theirs, stage)().hooks
            assert [(h.extension, h.is_async) for h in found] == [(h.extension, h.is_async) for h in expected], stage


async def test_the_hooks_run_around_their_stage_as_strawberry_runs_them() -> None:
    for runner_class in (ExtensionsRunner, SchemaExtensionsRunner):
        plain, generators = _Plain(), _Generators()
        context = ExecutionContext(query="{ __typename }", schema=None, allowed_operations=())  # type: ignore[arg-type]
        runner = runner_class(context, [plain, generators])
        async with runner.operation():
            with runner.parsing():
                pass
            async with runner.executing():
                generators.log.append("executing")
        assert plain.log == ["parse", "execute"], runner_class
        assert generators.log == [
            "operation in",
            "execute in",
            "executing",
            "execute out",
            "operation out",
        ], runner_class
