"""What every audit list shares: time-range filters, pagination, and CSV / JSON export.

One module so the action list, the partition and broker histories and the failover list filter,
page and export the same way (``?since=&until=&page=&format=csv|json``).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time
from typing import Any, Final
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.dateparse import parse_date, parse_datetime


class BadFilter(ValueError):
    """A filter, page or format the client sent that cannot be read: a 400 naming it, never a 500."""


FORMATS: Final = ("", "html", "csv", "json")
MAX_JSON_ROWS: Final = 10_000


def parse_time(raw: str, field: str, end_of_day: bool = False) -> datetime | None:
    """``2026-11-22`` or ``2026-11-22T06:00[:00][Z|+hh:mm]``; naive times are UTC. ``BadFilter`` if bad."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        moment = parse_datetime(raw)
        if moment is None:
            day: date | None = parse_date(raw)
            if day is None:
                raise ValueError
            moment = datetime.combine(day, time.max if end_of_day else time.min)
    except ValueError:
        raise BadFilter(f"{field} must be a date (YYYY-MM-DD) or a date and time (YYYY-MM-DDTHH:MM)") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def time_range(params: Mapping[str, str]) -> tuple[datetime | None, datetime | None]:
    since = parse_time(params.get("since", ""), "since")
    until = parse_time(params.get("until", ""), "until", end_of_day=True)
    if since and until and since > until:
        raise BadFilter("since is after until")
    return since, until


def wanted_format(request: HttpRequest) -> str:
    fmt = request.GET.get("format", "").strip().lower()
    if fmt not in FORMATS:
        raise BadFilter(f"format must be csv or json, not {fmt!r}")
    return fmt


def page_of(items: Any, request: HttpRequest, per_page: int = 50) -> Page[Any]:
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def query_string(filters: Mapping[str, Any]) -> str:
    """The non-empty filters, URL-encoded, for pager and export links."""
    return urlencode({k: v for k, v in filters.items() if v not in ("", None)})


def cell(value: Any) -> Any:
    """A CSV cell; text a spreadsheet would run as a formula gets a leading ', JSON values are dumped."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_response(rows: Iterable[Mapping[str, Any]], fields: Sequence[str], filename: str) -> HttpResponse:
    """``rows`` (dicts) as CSV, written row by row from a database iterator (one response body; a
    ``StreamingHttpResponse`` would break clients and tests that read ``content``)."""
    writer = csv.writer(_Echo())

    def lines() -> Iterable[str]:
        yield writer.writerow(fields)
        for row in rows:
            yield writer.writerow([cell(row.get(f)) for f in fields])

    response = HttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}.csv"'
    return response


def _json_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def json_rows(rows: Iterable[Mapping[str, Any]], limit: int = MAX_JSON_ROWS) -> tuple[list[dict[str, Any]], bool]:
    out: list[dict[str, Any]] = []
    for row in rows:
        if len(out) >= limit:
            return out, True
        out.append({k: _json_value(v) for k, v in row.items()})
    return out, False


def json_page(page: Page[Any], convert: Callable[[Any], Mapping[str, Any]], **extra: Any) -> JsonResponse:
    """One page of results with the paging facts a client needs to fetch the next."""
    return page_json(page, (convert(item) for item in page.object_list), **extra)


def page_json(page: Page[Any], results: Iterable[Mapping[str, Any]], **extra: Any) -> JsonResponse:
    """``results`` (the rows of ``page``, already converted) with the paging facts."""
    rows, _ = json_rows(results)
    return JsonResponse(
        {
            **extra,
            "count": page.paginator.count,
            "page": page.number,
            "pages": page.paginator.num_pages,
            "next_page": page.next_page_number() if page.has_next() else None,
            "results": rows,
        }
    )


def bad_request(message: str, as_json: bool) -> HttpResponse:
    if as_json:
        return JsonResponse({"error": message}, status=400)
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")
