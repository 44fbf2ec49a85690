"""Plumbing shared by the benchmark runners: worker processes, progress bars, result files.

Worker processes run one engine each and are killed on a timeout or crash, then restarted.

A worker runs ``target(conn, *args)``. The target sets itself up, sends ``("ready", info)`` (or
``("failed", traceback)``), then answers every job received on ``conn`` with one picklable reply
until it receives ``None``. The parent side, :class:`Worker`, turns a hang into a ``timeout`` and
a dead process into ``died`` without taking the run down: the benchmark records the failure against
that one job and goes on with a fresh process.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal, TypeVar

from grammarsd.errors import GrammarsdError


class BenchError(GrammarsdError):
    """A benchmark cannot run: bad data, a file that is not what it should be, an engine that
    cannot start. ``path`` names the offending file or directory when there is one; for malformed
    JSON, ``line`` and ``column`` (1-based) say where. Each runner has its own subclass."""

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.column = column
        where = "" if path is None else f"{path}: "
        if path is not None and line is not None:
            where = f"{path}:{line}:{column}: "
        super().__init__(where + message, hint=hint)


class WorkerStartError(GrammarsdError):
    """A worker could not start: it failed in set-up, died, or took longer than allowed."""


@dataclass(frozen=True)
class Reply:
    """The outcome of one job: ``ok`` with the target's ``value``, ``timeout`` (the process was
    killed after ``timeout_s``) or ``died`` (``exit_code`` says how)."""

    status: Literal["ok", "timeout", "died"]
    value: Any = None
    exit_code: int | None = None


class Worker:
    """One worker process running ``target`` with ``args``; started on demand.

    Parameters
    ----------
    label : names the worker in errors (an engine name).
    target : the process's main function, ``target(conn, *args)``.
    args : picklable arguments after ``conn``.
    setup_timeout_s : how long ``start`` waits for ``("ready", info)``.
    method : ``"fork"`` (inherits the parent's loaded objects; only where available) or
        ``"spawn"`` (a fresh interpreter: safe after torch has started threads).
    hint : added to the error when set-up fails (e.g. which extra to install).
    """

    def __init__(
        self,
        label: str,
        target: Callable[..., None],
        args: tuple[Any, ...],
        *,
        setup_timeout_s: float,
        method: Literal["fork", "spawn"] = "spawn",
        hint: str | None = None,
    ) -> None:
        self.label = label
        self.target = target
        self.args = args
        self.setup_timeout_s = setup_timeout_s
        self.method = method if method in mp.get_all_start_methods() else "spawn"
        self.hint = hint
        self._proc: Any = None
        self._conn: Connection | None = None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def start(self) -> dict[str, Any]:
        """Start the process and wait until it is ready; returns the info it sent.

        Raises
        ------
        WorkerStartError
            If set-up failed (with the worker's traceback), the process died, or it was not ready
            within ``setup_timeout_s``.
        """
        ctx: Any = mp.get_context(self.method)
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=self.target, args=(child, *self.args), daemon=True)
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        if not parent.poll(self.setup_timeout_s):
            self.kill()
            raise WorkerStartError(
                f"{self.label!r} did not start within {self.setup_timeout_s:.0f} s"
            )
        try:
            kind, info = parent.recv()
        except EOFError:
            code = proc.exitcode
            self.kill()
            raise WorkerStartError(
                f"{self.label!r} worker died while starting (exit code {code})"
            ) from None
        if kind != "ready":
            self.kill()
            raise WorkerStartError(f"{self.label!r} cannot start:\n{info}", hint=self.hint)
        return dict(info)

    def run(self, job: Any, timeout_s: float) -> Reply:
        """Send one job and wait for its reply. A timeout or a dead process kills the worker (the
        caller restarts it with ``start``)."""
        if self._conn is None:
            raise RuntimeError("worker not started")
        conn = self._conn
        try:
            conn.send(job)
            if conn.poll(timeout_s):
                return Reply("ok", conn.recv())
        except (EOFError, BrokenPipeError, ConnectionResetError):
            self._proc.join(5)
            code = self._proc.exitcode
            self.kill()
            return Reply("died", exit_code=code)
        self.kill()
        return Reply("timeout")

    def kill(self) -> None:
        """Kill this worker's process (only ours) and forget it."""
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join()
        if self._conn is not None:
            self._conn.close()
        self._proc, self._conn = None, None

    def close(self) -> None:
        """Ask the worker to finish, then make sure it is gone."""
        if self._conn is not None and self.alive:
            try:
                self._conn.send(None)
                self._proc.join(10)
            except (BrokenPipeError, OSError):
                pass
        self.kill()


def start_logged(worker: Worker, warmup_log: Path, error: type[BenchError]) -> None:
    """Start ``worker`` and append its set-up timings (one JSON line) to ``warmup_log``; a
    worker that cannot start raises ``error`` naming the engine."""
    try:
        info = worker.start()
    except WorkerStartError as e:
        raise error(f"engine {e.message}", hint=e.hint) from e
    with warmup_log.open("a", encoding="utf-8") as w:
        w.write(json.dumps(info) + "\n")


def serve(
    conn: Connection, setup: Callable[[], tuple[dict[str, Any], Callable[[Any], Any]]]
) -> None:
    """The worker side: ``setup()`` returns ``(ready_info, handle)``; then every job received is
    answered with ``handle(job)`` until ``None`` arrives. A failing set-up sends its traceback."""
    import traceback

    try:
        info, handle = setup()
    except BaseException:
        conn.send(("failed", traceback.format_exc(limit=8)))
        return
    conn.send(("ready", info))
    while True:
        job = conn.recv()
        if job is None:
            return
        conn.send(handle(job))


def describe(e: BaseException, limit: int = 2000) -> str:
    """``"Type: message"`` of an exception, cut to ``limit`` characters, for a result record."""
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= limit else text[:limit] + "..."


def drop_torn_tail(path: Path) -> None:
    """Cut an unfinished last line (a run killed mid-write) so that appending stays valid."""
    if path.exists():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            path.write_bytes(data[: data.rfind(b"\n") + 1])


def read_json(path: Path, error: type[BenchError]) -> Any:
    """The JSON document in ``path``; an unreadable file raises ``error`` naming it, malformed
    JSON with its line and column."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise error(f"not JSON: {e.msg}", path=path, line=e.lineno, column=e.colno) from e
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"cannot read: {e}", path=path) from e


_Record = TypeVar("_Record")


def read_jsonl(path: Path, record: Callable[..., _Record],
               error: type[BenchError]) -> Iterator[_Record]:
    """``record(**fields)`` for each line of a results file (none when it does not exist); a torn
    last line (a run killed mid-write) is dropped first, any other bad line raises ``error``
    with its line number."""
    if not path.exists():
        return
    drop_torn_tail(path)
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            yield record(**json.loads(line))
        except (json.JSONDecodeError, TypeError) as e:
            raise error(f"not a result record: {e}", path=path, line=n, column=1) from e


class _NoBar:
    def update(self, n: int) -> None: ...
    def set_description(self, text: str) -> None: ...
    def write(self, text: str) -> None: ...
    def close(self) -> None: ...


def progress(total: int, *, initial: int = 0, unit: str, enabled: bool = True) -> Any:
    """A tqdm bar with ETA on stderr (a silent stand-in when not ``enabled``)."""
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit=unit, dynamic_ncols=True)


__all__ = [
    "BenchError",
    "Reply",
    "Worker",
    "WorkerStartError",
    "describe",
    "drop_torn_tail",
    "progress",
    "read_json",
    "read_jsonl",
    "serve",
]
