"""A fixture is built once per machine, however many xdist workers ask for it at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from drafter_contracts.paths import cached_build


def test_concurrent_requests_build_once(tmp_path: Path) -> None:
    calls: list[int] = []

    def build(out: Path) -> None:
        calls.append(1)
        time.sleep(0.3)  # long enough for every other thread to arrive while the first builds
        out.mkdir()
        (out / "done.txt").write_text("ok")

    target = tmp_path / "fixtures" / "thing-v1"
    got: list[Path] = []
    threads = [threading.Thread(target=lambda: got.append(cached_build(target, "done.txt", build))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and got == [target] * 4
    assert sorted(p.name for p in target.parent.iterdir()) == ["thing-v1"]  # no temp copy, no lock file in the cache
