"""The one error the local servers raise."""


class LocalServiceError(Exception):
    """A project-local server could not be started; the message says what to install instead."""
