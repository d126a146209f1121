"""Strawberry's extension hooks without their per-request setup.

For each lifecycle stage of each request, Strawberry asks every extension whether it has the stage's hook
(`inspect.isgeneratorfunction` and friends) and wraps the bound method in a new `contextlib.contextmanager`, whose
`functools.wraps` copies the method's name, documentation and attributes: the same answer for the same extension
class every time. Here that answer is worked out once per class and stage, and a request only binds it to its own
extension instance. Hooks of any other form (plain or async functions) take Strawberry's own path.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from functools import partial
from typing import Any, Final, NamedTuple

from strawberry.extensions import SchemaExtension
from strawberry.extensions.context import (
    ExecutingContextManager,
    ExtensionContextManagerBase,
    OperationContextManager,
    ParsingContextManager,
    ValidationContextManager,
    WrappedHook,
)
from strawberry.extensions.runner import SchemaExtensionsRunner


class _Hook(NamedTuple):
    """A stage's hook of an extension class: the context manager factory taking the extension; whether it is async."""

    factory: Callable[..., Any]
    is_async: bool


# Per extension class and stage: its hook, None when it has none, UNCACHED for Strawberry's own path.
UNCACHED: Final = _Hook(lambda _: None, False)
_HOOKS: dict[tuple[type, str], _Hook | None] = {}


def _hook_of(cls: type, name: str, default: object) -> _Hook | None:
    hook_fn = getattr(cls, name)
    if hook_fn is default:
        return None
    if inspect.isgeneratorfunction(hook_fn):
        return _Hook(contextlib.contextmanager(hook_fn), False)
    if inspect.isasyncgenfunction(hook_fn):
        return _Hook(contextlib.asynccontextmanager(hook_fn), True)
    return UNCACHED


class _Known(ExtensionContextManagerBase):
    __slots__ = ()

    def get_hook(self, extension: SchemaExtension) -> WrappedHook | None:
        key = (type(extension), self.HOOK_NAME)
        try:
            found = _HOOKS[key]
        except KeyError:
            found = _HOOKS[key] = _hook_of(type(extension), self.HOOK_NAME, self.default_hook)
        if found is None:
            return None
        if found is UNCACHED:
            return super().get_hook(extension)
        return WrappedHook(extension=extension, hook=partial(found.factory, extension), is_async=found.is_async)


class _Operation(_Known, OperationContextManager):
    __slots__ = ()


class _Validation(_Known, ValidationContextManager):
    __slots__ = ()


class _Parsing(_Known, ParsingContextManager):
    __slots__ = ()


class _Executing(_Known, ExecutingContextManager):
    __slots__ = ()


class ExtensionsRunner(SchemaExtensionsRunner):
    """Strawberry's runner, its four stages' hooks found as above (streamed results keep Strawberry's)."""

    def operation(self) -> OperationContextManager:
        return _Operation(self.extensions)

    def validation(self) -> ValidationContextManager:
        return _Validation(self.extensions)

    def parsing(self) -> ParsingContextManager:
        return _Parsing(self.extensions)

    def executing(self) -> ExecutingContextManager:
        return _Executing(self.extensions)
