"""Errors the controller raises, named after Kafka's where one exists.

``ControllerMovedError`` is the only one that crosses the state machines: it means another
controller has been elected (our fenced write failed its ``/controller_epoch`` version check), and
the event loop answers it in one place by resigning.
"""

from __future__ import annotations


class ControllerError(Exception):
    """Base class of every error raised by ``controller_core``."""


class ControllerMovedError(ControllerError):
    """A fenced write failed its controller-epoch check: this process is no longer the controller."""


class StateChangeFailedError(ControllerError):
    """A state transition or election could not be made for one partition or replica."""


class IllegalStateError(ControllerError):
    """An internal invariant does not hold (Kafka's IllegalStateException)."""


class StaleBrokerEpochError(ControllerError):
    """A broker request carried an older broker epoch than the controller knows."""


class BrokerNotAvailableError(ControllerError):
    """A broker named in a request is not registered."""


class NotControllerError(ControllerError):
    """A request reached a process that is not the active controller."""


class ZkOperationError(ControllerError):
    """A ZooKeeper operation failed with a result code the caller did not expect."""

    def __init__(self, code: str, path: str, message: str = "") -> None:
        super().__init__(f"{code} on {path}" + (f": {message}" if message else ""))
        self.code = code
        self.path = path
