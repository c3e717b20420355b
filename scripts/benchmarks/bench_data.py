"""The bench's landed data: N Lindorm (Debezium envelope) messages for one ``customers`` table.

Deterministic for a seed, and reused when ``<workdir>/manifest.json`` matches the parameters and
the files on disk; :class:`Expected` is what one batch over all of it must report.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

GENERATOR_VERSION = 2
DEFAULT_SEED = 20160609
BASE_TS_MS = 1465491411807
FIRST = ("Ada", "Bo", "Chen", "Dana", "Emil", "Fang", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lin")
LAST = ("Wang", "Li", "Zhang", "Liu", "Smith", "Garcia", "Novak", "Okafor", "Sato", "Kim")
CITIES = ("Hangzhou", "Beijing", "Shanghai", "Shenzhen", "Chengdu", "Singapore", "Frankfurt")


@dataclass(frozen=True)
class Expected:
    """What the generator wrote, and so what one batch over all of it must report."""

    inserts: int
    updates: int
    deletes: int
    live_keys: int  # keys whose last change is an insert or update: rows in the table

    @property
    def messages(self) -> int:
        return self.inserts + self.updates + self.deletes


# --------------------------------------------------------------------------- data generation


def _image(rng: random.Random, key: int) -> str:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    cents = rng.randrange(100, 1_000_000)
    return (
        f'{{"id":"{key}","name":"{first} {last}","email":"{first.lower()}{key}@mail.com",'
        f'"amount":{cents // 100}.{cents % 100:02d},"city":"{rng.choice(CITIES)}"}}'
    )


def _message(op: str, ts: int, before: str, after: str) -> str:
    return (
        f'{{"schema":{{}},"payload":{{"op":"{op}","ts_ms":{ts + 8},"before":{before},'
        f'"after":{after},"source":{{"version":"v1.0","db":"ld-bench","namespace":"default",'
        f'"table":"customers","ts_ms":{ts}}}}}}}'
    )


def generate(landing: Path, messages: int, files: int, seed: int) -> Expected:
    """Write ``messages`` lines over ``files`` files: ~50% inserts, ~40% updates, ~10% deletes."""
    rng = random.Random(seed)
    live: list[int] = []
    images: dict[int, str] = {}
    counts = {"c": 0, "u": 0, "d": 0}
    next_key = 1000
    if landing.exists():
        shutil.rmtree(landing)
    landing.mkdir(parents=True)
    bounds = [messages * i // files for i in range(files + 1)]
    for f in range(files):
        lines: list[str] = []
        for i in range(bounds[f], bounds[f + 1]):
            ts = BASE_TS_MS + i
            draw = rng.random()
            if draw < 0.5 or not live:
                key, next_key = next_key, next_key + 1
                image = _image(rng, key)
                images[key] = image
                live.append(key)
                lines.append(_message("c", ts, "null", image))
                counts["c"] += 1
            elif draw < 0.9:
                key = live[rng.randrange(len(live))]
                before, after = images[key], _image(rng, key)
                images[key] = after
                lines.append(_message("u", ts, before, after))
                counts["u"] += 1
            else:
                j = rng.randrange(len(live))
                key = live[j]
                live[j] = live[-1]
                live.pop()
                lines.append(_message("d", ts, images.pop(key), "null"))
                counts["d"] += 1
        lines.append("")
        (landing / f"part-{f:05d}.jsonl").write_text("\n".join(lines), encoding="utf-8")
    return Expected(counts["c"], counts["u"], counts["d"], len(live))


def prepare_data(workdir: Path, messages: int, files: int, seed: int) -> tuple[Expected, bool]:
    """The data for these parameters, reusing what an earlier run wrote: (expected, reused)."""
    landing, manifest = workdir / "landing", workdir / "manifest.json"
    wanted = {"version": GENERATOR_VERSION, "messages": messages, "files": files, "seed": seed}
    if manifest.is_file():
        recorded = json.loads(manifest.read_text(encoding="utf-8"))
        sizes: dict[str, int] = recorded.get("sizes", {})
        present = sorted(p.name for p in landing.glob("*")) if landing.is_dir() else []
        if (
            all(recorded.get(k) == v for k, v in wanted.items())
            and present == sorted(sizes)
            and all((landing / name).stat().st_size == size for name, size in sizes.items())
        ):
            return Expected(**recorded["expected"]), True
    manifest.unlink(missing_ok=True)
    expected = generate(landing, messages, files, seed)
    sizes = {p.name: p.stat().st_size for p in sorted(landing.glob("*.jsonl"))}
    record = {**wanted, "sizes": sizes, "expected": asdict(expected)}
    manifest.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return expected, False
