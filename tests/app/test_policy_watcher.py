"""Hot reload's file watcher (`policy/watcher.py`): a thread polls the file and hands each change
to the event loop once, and the loop itself gets no task or timer for it; the same for the enforcing
policy and for the shadow policy (`shadow_policy:`)."""

import asyncio
import os
import threading
import time

import pytest

from proxy.commands.table import CommandTable
from proxy.policy.watcher import PolicyWatcher

TABLE = CommandTable.from_snapshot()
POLICY = "name: {name}\nrules:\n  K2: {{style: lowercase}}\n"


class FakeProxy:
    def __init__(self):
        self.engine = None
        self._shadow = None
        self.applied = []

    def set_engine(self, engine) -> None:
        self.engine = engine
        self.applied.append(engine.policy.name)

    @property
    def shadow(self):
        return self._shadow

    @shadow.setter
    def shadow(self, shadow) -> None:
        self._shadow = shadow
        self.applied.append(f"shadow {shadow.name}")


def _touch(path, text: str, step: int) -> None:
    path.write_text(text)
    stamp = time.time_ns() + step * 10_000_000  # a new mtime even within the clock's granularity
    os.utime(path, ns=(stamp, stamp))


async def _watch(path, proxy, changes, shadow=False) -> int:
    loop = asyncio.get_running_loop()
    watcher = PolicyWatcher(proxy, str(path), TABLE, shadow=shadow)
    watcher.start(loop, interval=0.02)
    tasks = len(asyncio.all_tasks())
    try:
        for step, text in enumerate(changes, 1):
            _touch(path, text, step)
            deadline = loop.time() + 5
            while len(proxy.applied) < step and loop.time() < deadline and "broken" not in text:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.15)  # several more polls: none may reload again
        return tasks
    finally:
        watcher.stop()


@pytest.mark.parametrize("shadow", [False, True], ids=["enforcing", "shadow"])
def test_each_change_is_reloaded_once_and_a_bad_file_is_refused(tmp_path, shadow):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.format(name="first"))
    proxy = FakeProxy()
    changes = [POLICY.format(name="second"), "name: broken\nrules:\n  K2: {style: weird}\n",
               POLICY.format(name="third")]
    tasks = asyncio.run(_watch(path, proxy, changes, shadow))
    assert proxy.applied == (["shadow second", "shadow third"] if shadow else ["second", "third"])
    assert proxy.engine is None if shadow else proxy.shadow is None  # the other role is untouched
    assert tasks == 1  # only the test's own coroutine: the loop waits without a timer


def test_stop_ends_the_thread(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.format(name="first"))

    async def run():
        watcher = PolicyWatcher(FakeProxy(), str(path), TABLE)
        watcher.start(asyncio.get_running_loop(), interval=0.02)
        watcher.stop()
        return watcher

    watcher = asyncio.run(run())
    deadline = time.monotonic() + 2
    while any(t.name == "policy-watcher" and t.is_alive() for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert watcher.stopped.is_set()


def _configmap_swap(directory, name: str, text: str, generation: int) -> None:
    """What the kubelet does to a ConfigMap volume: the files in a new timestamped directory,
    then the `..data` symlink replaced atomically; `policy.yaml` is a symlink through `..data`."""
    new = directory / f"..2024_01_01_00_00_0{generation}.000000000"
    new.mkdir()
    (new / name).write_text(text)
    (directory / "..data_tmp").symlink_to(new.name)
    os.replace(directory / "..data_tmp", directory / "..data")
    if not (directory / name).is_symlink():
        (directory / name).symlink_to(f"..data/{name}")


async def _watch_configmap(directory, proxy) -> None:
    loop = asyncio.get_running_loop()
    watcher = PolicyWatcher(proxy, str(directory / "policy.yaml"), TABLE)
    watcher.start(loop, interval=0.02)
    try:
        for generation, name in enumerate(["second", "third"], 2):
            old = os.readlink(directory / "..data")
            _configmap_swap(directory, "policy.yaml", POLICY.format(name=name), generation)
            (directory / old / "policy.yaml").unlink()  # the kubelet removes the old generation
            deadline = loop.time() + 5
            while len(proxy.applied) < generation - 1 and loop.time() < deadline:
                await asyncio.sleep(0.01)
    finally:
        watcher.stop()


def test_a_configmap_symlink_swap_is_reloaded(tmp_path):
    _configmap_swap(tmp_path, "policy.yaml", POLICY.format(name="first"), 1)
    proxy = FakeProxy()
    asyncio.run(_watch_configmap(tmp_path, proxy))
    assert proxy.applied == ["second", "third"]
