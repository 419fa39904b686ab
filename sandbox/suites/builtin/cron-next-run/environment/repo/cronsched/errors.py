"""Errors raised while parsing or evaluating cron expressions."""


class CronError(Exception):
    """Base class of cronsched errors."""


class CronSyntaxError(CronError, ValueError):
    """An expression or one of its fields is malformed."""

    def __init__(self, message, field=None, text=None):
        self.field = field
        self.text = text
        prefix = f"{field} field {text!r}: " if field else ""
        super().__init__(prefix + message)


class NoRunError(CronError):
    """The expression never fires within the search horizon (e.g. `0 0 31 2 *`)."""
