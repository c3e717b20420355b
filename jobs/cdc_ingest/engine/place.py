"""Where an engine lives: a directory holding its socket, its lock and its log.

``CDC_INGEST_ENGINE_DIR`` names it (default ``$XDG_STATE_HOME/cdc-ingest/engine``, that is
``~/.local/state/cdc-ingest/engine``). One directory holds at most one engine: the engine holds
an exclusive lock on ``engine.lock`` for its whole life, so a second start finds it and reuses it,
and a crashed engine's lock is gone with its process (the kernel drops it), so the next start
replaces it. The socket is a Unix socket readable by its owner only: requests carry secrets.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from cdc_ingest.run_environment import environ

ENGINE_DIR_VARIABLE = "CDC_INGEST_ENGINE_DIR"
# "off": every run starts its own Spark, even where an engine answers.
ENGINE_SWITCH_VARIABLE = "CDC_INGEST_ENGINE"


@dataclass(frozen=True)
class EnginePlace:
    """The files of one engine."""

    directory: Path

    @property
    def socket(self) -> Path:
        return self.directory / "engine.sock"

    @property
    def lock(self) -> Path:
        return self.directory / "engine.lock"

    @property
    def log(self) -> Path:
        return self.directory / "engine.log"

    def prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    def is_held(self) -> bool:
        """Whether a live engine holds the lock (it answers, or is starting or stopping)."""
        if not self.lock.exists():
            return False
        with self.lock.open("a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
        return False

    def wait_released(self) -> None:
        """Block until the engine holding the lock has exited (its process gone)."""
        with self.lock.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            fcntl.flock(handle, fcntl.LOCK_UN)


def engine_place() -> EnginePlace:
    """The engine of this environment (``CDC_INGEST_ENGINE_DIR``)."""
    env = environ()
    chosen = env.get(ENGINE_DIR_VARIABLE)
    if chosen:
        return EnginePlace(Path(chosen))
    state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return EnginePlace(Path(state) / "cdc-ingest" / "engine")


def engine_wanted() -> bool:
    """False when told to run cold (``CDC_INGEST_ENGINE=off``)."""
    return environ().get(ENGINE_SWITCH_VARIABLE, "").lower() not in ("off", "0", "false", "no")
