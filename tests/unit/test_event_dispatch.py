"""The controller's event table: every event class has exactly one handler, and it is the right one.

``Controller.process`` looks handlers up in ``EVENT_HANDLERS`` by the event's class; an event class
missing there would only be logged ("no handler") and dropped on the event thread, so the table is
checked against the event module here.
"""

from __future__ import annotations

import inspect

from controller_core import events
from controller_core.controller import EVENT_HANDLERS, Controller
from controller_core.events import ControllerEvent


def _event_classes() -> set[type[ControllerEvent]]:
    return {
        obj
        for obj in vars(events).values()
        if isinstance(obj, type) and issubclass(obj, ControllerEvent) and obj is not ControllerEvent
    }


def _event_annotation(handler: object) -> str:
    params = list(inspect.signature(handler).parameters.values())  # type: ignore[arg-type]
    assert [p.name for p in params] == ["self", "event"], handler
    annotation = params[1].annotation
    return annotation if isinstance(annotation, str) else annotation.__name__


def test_every_event_class_has_a_handler_and_nothing_else_is_in_the_table() -> None:
    assert set(EVENT_HANDLERS) == _event_classes()


def test_no_handler_serves_two_event_classes() -> None:
    handlers = list(EVENT_HANDLERS.values())
    assert len(set(handlers)) == len(handlers)


def test_each_handler_takes_the_event_class_it_is_registered_for() -> None:
    for cls, handler in EVENT_HANDLERS.items():
        assert _event_annotation(handler) == cls.__name__, (cls, handler)


def test_every_event_handling_method_is_in_the_table() -> None:
    names = {cls.__name__ for cls in _event_classes()}
    handling = {
        fn
        for name, fn in vars(Controller).items()
        if name.startswith("_on_")
        and callable(fn)
        and list(inspect.signature(fn).parameters)[1:] == ["event"]
        and _event_annotation(fn) in names
    }
    assert handling == set(EVENT_HANDLERS.values())
