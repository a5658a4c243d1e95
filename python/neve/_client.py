"""`neve.connect`: insert into tables through a running `neve serve` (docs/SERVER.md).

The server does the work (group commit, idempotency, tenants); this is an HTTP client of its
documented API, on the standard library. Rows travel as an Arrow IPC stream.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Iterable, Mapping, Optional

import pyarrow as pa

from neve._neve import (
    ConflictError,
    InternalError,
    InvalidInputError,
    NeveError,
    NotFoundError,
    SchemaError,
    StorageError,
)


class AuthError(NeveError):
    """No token, a bad token (401), or a token whose role does not allow the call (403)."""


class ServerBusyError(NeveError):
    """The server refused for now (429 overloaded, 503 shutting down) and retries ran out."""


_BY_CODE = {
    "schema_conflict": SchemaError,
    "unauthorized": AuthError,
    "forbidden": AuthError,
    "table_not_found": NotFoundError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "overloaded": ServerBusyError,
    "shutting_down": ServerBusyError,
    "storage_unavailable": StorageError,
    "internal": InternalError,
}


def _error(status: int, body: bytes) -> NeveError:
    try:
        err = json.loads(body)["error"]
        code, message = err.get("code", ""), err.get("message", "")
    except (ValueError, KeyError, TypeError):
        code, message = "", body.decode("utf-8", "replace")
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = InvalidInputError if 400 <= status < 500 else StorageError if status == 503 else InternalError
    return cls(f"{status} {code}: {message}".strip())


class Client:
    """A connection to `neve serve` at `url` with `token` (the server's `--token`, or a
    tenant's token). Tables are named as the server names them (`events`, or `ns/cpu`)."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 60.0, retries: int = 5):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries

    def __repr__(self) -> str:
        return f"neve.Client({self.url!r})"

    def _call(self, method: str, path: str, body: Optional[bytes] = None, headers: Optional[dict] = None) -> Any:
        h = dict(headers or {})
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(self.url + path, data=body, method=method, headers=h)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    data = r.read()
                    return json.loads(data) if data else None
            except urllib.error.HTTPError as e:
                data = e.read()
                # Overloaded or restarting: come back when told to. With the request's
                # idempotency key a retry never adds rows twice.
                if e.code in (429, 503) and attempt < self.retries:
                    wait = float(e.headers.get("Retry-After") or 1)
                    time.sleep(min(wait, 30.0))
                    continue
                raise _error(e.code, data) from None
        raise AssertionError("unreachable")

    def tables(self) -> list:
        """The names of the tables this token sees."""
        return self._call("GET", "/v1/tables")["tables"]

    def info(self, name: str) -> dict:
        """What `neve info --json` prints, for a table of the server."""
        return self._call("GET", f"/v1/tables/{urllib.parse.quote(name, safe='/')}")

    def create_table(
        self,
        name: str,
        partition_by: Optional[str] = None,
        sort_by: Optional[Iterable[str]] = None,
        schema: Optional[str] = None,
        settings: Optional[Mapping[str, Any]] = None,
        strict_schema: bool = False,
    ) -> dict:
        """Create a table (an admin token's right); `ConflictError` when it exists."""
        spec = {"partition_by": partition_by or "", "sort_by": list(sort_by or []), "strict_schema": strict_schema}
        if schema:
            spec["schema"] = schema
        if settings:
            from neve import _text_map

            spec["settings"] = _text_map(settings)
        return self._call("PUT", f"/v1/tables/{urllib.parse.quote(name, safe='/')}", json.dumps(spec).encode(),
                          {"Content-Type": "application/json"})

    def insert(self, name: str, data: Any, idempotency_key: Optional[str] = None) -> dict:
        """Insert rows and wait until they are committed: `{"version", "rows", "commit_id"}`,
        with `"duplicate": true` when the key was committed before (nothing added).

        `data` is anything `Table.insert` takes. Without `idempotency_key` one is made, so the
        client's own retries (429, 503) never insert twice."""
        from neve import _arrow_stream

        reader = pa.RecordBatchReader.from_stream(_arrow_stream(data))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, reader.schema) as w:
            for batch in reader:
                w.write_batch(batch)
        headers = {
            "Content-Type": "application/vnd.apache.arrow.stream",
            "Idempotency-Key": idempotency_key or str(uuid.uuid4()),
        }
        path = f"/v1/tables/{urllib.parse.quote(name, safe='/')}/insert"
        return self._call("POST", path, sink.getvalue().to_pybytes(), headers)


def connect(url: str, token: Optional[str] = None, timeout: float = 60.0, retries: int = 5) -> Client:
    """A client of `neve serve` at `url` (e.g. `http://127.0.0.1:8080`)."""
    return Client(url, token, timeout, retries)
