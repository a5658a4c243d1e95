"""`neve.connect`: insert into and query tables through a running `neve serve` (docs/SERVER.md).

The server does the work (group commit, idempotency, tenants, query limits); this is an HTTP
client of its documented API, on the standard library. Rows travel as Arrow IPC streams both
ways: results are read batch by batch as they arrive, never buffered whole by the client.
Each thread keeps its connection between calls (keep-alive), so a stream of small calls pays
for one TCP connection and TLS handshake, not one each.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
from typing import Any, Iterable, Mapping, Optional, Union

import pyarrow as pa

from neve._neve import (
    ConflictError,
    InternalError,
    InvalidInputError,
    NeveError,
    NotFoundError,
    SchemaError,
    SqlError,
    StorageError,
)


class AuthError(NeveError):
    """No token, a bad token (401), or a token whose role does not allow the call (403)."""


class ServerBusyError(NeveError):
    """The server refused for now (429 overloaded or too many queries, 503 shutting down) and
    retries ran out."""


class QueryTimeoutError(NeveError, TimeoutError):
    """The query ran longer than its timeout (the server's `query.timeout` or the call's)."""


class UnreachableError(NeveError, ConnectionError):
    """No answer from the server: the connection was refused (not running, restarting) and
    retries ran out, the name does not resolve, its TLS certificate is not trusted (a private
    CA's: pass `ca_cert`), nothing came within `timeout`, or the connection broke before the
    answer. The call may or may not have been done when the connection broke; an insert is
    safe to repeat with the same `idempotency_key`, which an insert's error carries as its
    `idempotency_key` attribute (and names in its message)."""

    idempotency_key: Optional[str] = None


_BY_CODE = {
    "schema_conflict": SchemaError,
    "invalid_value": SchemaError,
    "invalid_schema": SchemaError,
    "unauthorized": AuthError,
    "forbidden": AuthError,
    "table_not_found": NotFoundError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "overloaded": ServerBusyError,
    "too_many_queries": ServerBusyError,
    "query_timeout": QueryTimeoutError,
    "sql_syntax": SqlError,
    "invalid_query": SqlError,
    "shutting_down": ServerBusyError,
    "storage_unavailable": StorageError,
    "internal": InternalError,
}


def _parsed(body: bytes) -> "tuple[str, str]":
    """The server's error code and message, or no code and the body as text (an answer that is
    not the server's)."""
    try:
        err = json.loads(body)["error"]
        return err.get("code", ""), err.get("message", "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return "", body.decode("utf-8", "replace")


def _error(status: int, code: str, message: str) -> NeveError:
    cls = _BY_CODE.get(code)
    if cls is None:
        # Other codes by their status, and answers that are not the server's: a reverse proxy
        # in front of it refusing (401, 403, 429) or giving up on it (502, 504: the call may
        # or may not have been done, as when a connection breaks).
        by_status = {401: AuthError, 403: AuthError, 404: NotFoundError, 409: ConflictError,
                     429: ServerBusyError, 502: UnreachableError, 503: StorageError, 504: UnreachableError}
        cls = by_status.get(status) or (InvalidInputError if 400 <= status < 500 else InternalError)
    return cls(f"{status} {code}: {message}".strip())


class Client:
    """A connection to `neve serve` at `url` with `token` (the server's `--token`, or a
    tenant's token). Tables are named as the server names them (`events`); line-protocol
    tables (a namespace's measurements) are read with SQL, as `ns.cpu`.
    For an `https://` server whose certificate a private CA signed, `ca_cert` is that CA's
    PEM file (else the system's CAs are trusted). For a server that asks for client
    certificates (`--tls-client-ca`), `client_cert` is this client's certificate in PEM and
    `client_key` its key (or None when the key is in the same file)."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 60.0, retries: int = 5,
                 ca_cert: Optional[str] = None, client_cert: Optional[str] = None,
                 client_key: Optional[str] = None):
        self.url = url.rstrip("/")
        self.token = _checked_token(token)
        self.timeout = timeout
        self.retries = retries
        u = urllib.parse.urlsplit(self.url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise InvalidInputError(f"{url!r} is not a server's URL: use http://host:port or https://host:port")
        if u.username is not None or u.password is not None:
            # Never sent (the token is), and kept out of every message and repr.
            raise InvalidInputError("a server's URL holds no user or password: pass token= instead")
        try:
            port = u.port
        except ValueError:
            raise InvalidInputError(f"{url!r}: the port is not a number from 0 to 65535") from None
        self._https = u.scheme == "https"
        # The port always given: http.client would read an IPv6 host's last group as one.
        self._host, self._port, self._prefix = u.hostname, port or (443 if self._https else 80), u.path
        if (client_cert or client_key) and not self._https:
            raise InvalidInputError("client_cert is for an https:// server")
        if client_key and not client_cert:
            raise InvalidInputError("client_key needs client_cert")
        self._tls = ssl.create_default_context(cafile=ca_cert) if self._https else None
        if client_cert:
            try:
                self._tls.load_cert_chain(client_cert, client_key)
            except (OSError, ssl.SSLError) as e:
                raise InvalidInputError(
                    f"cannot use client_cert {client_cert!r}"
                    + (f" with client_key {client_key!r}" if client_key else "") + f": {e}") from e
        # Each thread's idle connection, kept for its next call.
        self._idle = threading.local()

    def __repr__(self) -> str:
        return f"neve.Client({self.url!r})"

    def close(self) -> None:
        """Close this thread's idle connection (the others' close with their threads)."""
        conn, self._idle.conn = getattr(self._idle, "conn", None), None
        if conn is not None:
            conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._tls)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _send(self, method: str, path: str, body: Optional[bytes], headers: dict, reuse: bool, timeout: float):
        """One request: its connection and response (status and headers read)."""
        conn = getattr(self._idle, "conn", None)
        self._idle.conn = None
        if getattr(self._idle, "pid", None) != os.getpid():
            # Kept by the parent before a fork: its socket is the parent's too, and two
            # processes on one stream would read each other's answers. Left to the parent.
            conn = None
        if conn is not None and reuse:
            try:
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                conn.request(method, self._prefix + path, body=body, headers=headers)
                return conn, conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, ConnectionAbortedError,
                    BrokenPipeError):
                # The server closed the idle connection (its header_read_timeout) before the
                # request reached it: send it again on a new one.
                pass
        if conn is not None:
            conn.close()
        conn = self._connection(timeout)
        try:
            conn.request(method, self._prefix + path, body=body, headers=headers)
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def _release(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse) -> None:
        """Keep `conn` (its answer read whole) for the thread's next call, unless it closes."""
        if response.will_close:
            conn.close()
            return
        old, self._idle.conn = getattr(self._idle, "conn", None), conn
        self._idle.pid = os.getpid()
        if old is not None:
            old.close()

    def _call(self, method: str, path: str, body: Optional[bytes] = None, headers: Optional[dict] = None,
              repeatable: bool = True) -> Any:
        data = self._read(*self._open(method, path, body, headers, repeatable))
        return json.loads(data) if data else None

    def _read(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse) -> bytes:
        """The whole answer; the connection kept for the next call, or closed if it broke."""
        try:
            data = response.read()
        except (http.client.HTTPException, OSError) as e:
            conn.close()
            raise UnreachableError(f"{self.url}: the connection broke during the answer ({e})") from e
        self._release(conn, response)
        return data

    def _open(self, method: str, path: str, body: Optional[bytes] = None, headers: Optional[dict] = None,
              repeatable: bool = True, timeout: Optional[float] = None):
        """The connection and response of a successful call, its body not read yet.
        `repeatable`: whether the call may be sent again after a connection broke with it under
        way (reads, and inserts, which carry an idempotency key); a refused connection is always
        retried, as the request never reached the server. `timeout`: how long the socket may
        wait for bytes, when longer than the client's."""
        h = dict(headers or {})
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        wait_for = max(self.timeout, timeout or 0)
        for attempt in range(self.retries + 1):
            try:
                conn, r = self._send(method, path, body, h, reuse=repeatable, timeout=wait_for)
            except (http.client.HTTPException, OSError) as e:
                broke = isinstance(e, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError,
                                       http.client.RemoteDisconnected))
                # A server restarting refuses for a moment (a rolling update): back off and
                # come back, from a quarter of a second up to 5 s between tries.
                if (isinstance(e, ConnectionRefusedError) or (broke and repeatable)) and attempt < self.retries:
                    time.sleep(_backoff(attempt))
                    continue
                raise UnreachableError(self._unreachable(e, attempt + 1, wait_for)) from e
            if 200 <= r.status < 300:
                return conn, r
            data = self._read(conn, r)
            if 300 <= r.status < 400:
                # Not followed: the request was not run, and a body sent again elsewhere
                # (with the token) is not this client's call to make.
                where = r.getheader("Location") or "nowhere"
                raise InvalidInputError(
                    f"{self.url}: the server redirects ({r.status}) to {where}: connect to that URL")
            # Overloaded or restarting: come back when told to. With the request's
            # idempotency key a retry never adds rows twice. A call that is not repeatable is
            # sent again only when refused before any work (a store failing under it may have
            # done it: a table created, then the answer lost).
            code, message = _parsed(data)
            before_work = code in ("overloaded", "too_many_queries", "shutting_down")
            if r.status in (429, 503) and attempt < self.retries and (repeatable or before_work):
                time.sleep(_retry_after(r.getheader("Retry-After"), attempt))
                continue
            raise _error(r.status, code, message)
        raise AssertionError("unreachable")

    def _unreachable(self, reason: BaseException, tries: int, timeout: float) -> str:
        host = urllib.parse.urlsplit(self.url).netloc
        if isinstance(reason, ssl.SSLCertVerificationError):
            return (f"{self.url}: the server's TLS certificate is not trusted ({reason.verify_message}); "
                    "for a certificate a private CA signed, pass ca_cert='<the CA's PEM file>'")
        if isinstance(reason, ssl.SSLError) and any(
                a in (reason.reason or "") for a in ("CERTIFICATE_REQUIRED", "UNKNOWN_CA", "BAD_CERTIFICATE")):
            return (f"{self.url}: the server refused this client's certificate ({reason.reason}); it asks for "
                    "one its client CA signed: pass client_cert='<PEM file>' (and client_key=)")
        if isinstance(reason, ssl.SSLError):
            return f"{self.url}: the TLS handshake failed ({reason}); is it an https:// server?"
        if isinstance(reason, socket.gaierror):
            return f"{host}: the name does not resolve ({reason.strerror or reason})"
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return f"{self.url}: no answer within {timeout} s (the client's timeout)"
        if isinstance(reason, ConnectionRefusedError):
            return f"{self.url}: connection refused, {tries} tries (is neve serve running and listening there?)"
        return (f"{self.url}: the connection broke before the server answered ({reason or type(reason).__name__}); "
                "an https:// server closes a plain http:// connection")

    def tables(self) -> list:
        """The names of the tables this token sees."""
        return self._call("GET", "/v1/tables")["tables"]

    def info(self, name: str) -> dict:
        """A table of the server: `{"table", "version", "files", "rows", "bytes", "schema"}`,
        the schema as its DDL text (`neve info` prints it so)."""
        return self._call("GET", f"/v1/tables/{urllib.parse.quote(name, safe='/')}")

    def create_table(
        self,
        name: str,
        partition_by: Optional[str] = None,
        sort_by: Optional[Iterable[str]] = None,
        schema: Optional[str] = None,
        settings: Optional[Mapping[str, Any]] = None,
        strict_schema: bool = False,
        merge: Optional[str] = None,
    ) -> dict:
        """Create a table (an admin token's right); `ConflictError` when it exists. `merge`
        as in `neve.create_table`."""
        from neve import _names

        spec = {"partition_by": partition_by or "", "sort_by": _names(sort_by or [], "sort_by"), "strict_schema": strict_schema}
        if schema:
            spec["schema"] = schema
        if merge:
            spec["merge"] = merge
        if settings:
            from neve import _text_map

            spec["settings"] = _text_map(settings, "settings")
        # Not sent again after a broken connection: had the first one created the table, the
        # second would answer ConflictError.
        return self._call("PUT", f"/v1/tables/{urllib.parse.quote(name, safe='/')}", json.dumps(spec).encode(),
                          {"Content-Type": "application/json"}, repeatable=False)

    def insert(self, name: str, data: Any, idempotency_key: Optional[str] = None) -> dict:
        """Insert rows and wait until they are committed: `{"version", "rows", "commit_id"}`,
        with `"duplicate": true` when the key was committed before (nothing added).

        `data` is anything `Table.insert` takes. Without `idempotency_key` one is made, so the
        client's own retries (429, 503, a connection refused or broken) never insert twice."""
        from neve import _arrow_stream

        reader = pa.RecordBatchReader.from_stream(_arrow_stream(data))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, reader.schema) as w:
            for batch in reader:
                w.write_batch(batch)
        key = idempotency_key or str(uuid.uuid4())
        headers = {"Content-Type": "application/vnd.apache.arrow.stream", "Idempotency-Key": key}
        path = f"/v1/tables/{urllib.parse.quote(name, safe='/')}/insert"
        try:
            return self._call("POST", path, sink.getvalue().to_pybytes(), headers)
        except UnreachableError as e:
            # The server may have committed it before the answer was lost: only the same key
            # again is safe, so the caller is given the one this client made.
            e.idempotency_key = key
            e.args = (f"{e}; the insert may have been committed: repeat it with idempotency_key={key!r}, "
                      "which never adds its rows twice",)
            raise


    def sql(self, query: str, as_of: Any = None, timeout: Union[str, float, None] = None) -> pa.Table:
        """Run `query` on the server; the tables are the token's (`SHOW TABLES` lists them).

        Every table is read at one snapshot for the whole query: the latest, or `as_of` (a
        version number or a time, as `Table.sql` takes it). `timeout` ("30s", or seconds)
        shortens the server's limit for this query. Raises `SqlError` for a bad query,
        `NotFoundError` for an unknown table, `QueryTimeoutError`, `ServerBusyError` when
        the server runs too many queries and retries ran out."""
        return self.sql_stream(query, as_of, timeout).read_all()

    def sql_stream(self, query: str, as_of: Any = None, timeout: Union[str, float, None] = None) -> pa.RecordBatchReader:
        """Like `sql`, as a RecordBatchReader that reads batches off the connection as they
        arrive: the client holds one batch at a time. Reading to the end, or dropping the
        reader (`del reader`, leaving a `for` loop over it), closes the connection, which
        cancels the query on the server. (pyarrow's `close()` does not reach the connection.)"""
        from neve import _as_of

        params = {}
        if as_of is not None:
            params["as_of"] = _as_of(as_of)
        if timeout is not None:
            params["timeout"] = f"{timeout}s" if isinstance(timeout, (int, float)) else timeout
        path = "/v1/sql" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        headers = {"Content-Type": "text/plain; charset=utf-8", "Accept": "application/vnd.apache.arrow.stream"}
        # A result has its connection to itself, closed with it: closing it is what cancels
        # the query on the server.
        # The socket waits as long as the query may run (and a little more for the answer).
        from neve import _duration_ms

        limit = None if timeout is None else _duration_ms(timeout, "timeout") / 1000
        conn, response = self._open("POST", path, query.encode(), headers,
                                    timeout=None if limit is None else limit + 5)
        try:
            reader = pa.ipc.open_stream(response)
        except Exception as e:
            response.close()
            conn.close()
            raise _cut_short(e) from None

        def batches():
            try:
                while True:
                    try:
                        batch = reader.read_next_batch()
                    except StopIteration:
                        return
                    except (TimeoutError, socket.timeout):
                        raise UnreachableError(
                            f"{self.url}: no bytes of the result within the client's timeout; pass "
                            "timeout= to sql() for a query that takes longer") from None
                    except Exception as e:
                        raise _cut_short(e) from None
                    yield batch
            finally:
                response.close()
                conn.close()

        return pa.RecordBatchReader.from_batches(reader.schema, batches())


def _checked_token(token: Optional[str]) -> Optional[str]:
    """The token without the whitespace around it (read from a file, it ends in a newline);
    one holding anything else a header cannot carry is refused, without echoing it."""
    if token is None:
        return None
    t = token.strip()
    if any(not (0x21 <= ord(c) <= 0x7E) for c in t):
        raise InvalidInputError(
            f"the token holds a character a header cannot carry (a space, a control character or "
            f"non-ASCII; {len(t)} characters): pass it as the server was given it")
    return t


def _retry_after(header: Optional[str], attempt: int) -> float:
    """Seconds to wait as the server says, in seconds or as an HTTP date; backing off as for a
    refused connection when it says nothing usable; never below 0 nor above 30 s."""
    wait: Optional[float] = None
    if header:
        try:
            wait = float(header)
        except ValueError:
            try:
                wait = email.utils.parsedate_to_datetime(header).timestamp() - time.time()
            except (TypeError, ValueError, IndexError, OverflowError):
                wait = None
    if wait is None or wait != wait:
        wait = _backoff(attempt)
    return min(max(wait, 0.0), 30.0)


def _backoff(attempt: int) -> float:
    """The wait before try `attempt + 1`: a quarter of a second, doubling, at most 5 s."""
    return min(0.25 * 2**attempt, 5.0)


def _cut_short(e: Exception) -> NeveError:
    """The server ends a result early, without an error body, when the query fails after its
    first bytes left (a timeout, the memory limit, a failed read)."""
    return InternalError(
        f"the server ended the result early ({e}); the query failed while running, "
        "e.g. past its timeout or memory limit: the server's log says why"
    )


def connect(url: str, token: Optional[str] = None, timeout: float = 60.0, retries: int = 5,
            ca_cert: Optional[str] = None, client_cert: Optional[str] = None,
            client_key: Optional[str] = None) -> Client:
    """A client of `neve serve` at `url` (e.g. `http://127.0.0.1:8080`, or `https://…` for a
    server started with `--tls-cert`; `ca_cert`: the PEM file of a private CA to trust;
    `client_cert` and `client_key`: this client's certificate and key, for a server started
    with `--tls-client-ca`)."""
    return Client(url, token, timeout, retries, ca_cert, client_cert, client_key)
