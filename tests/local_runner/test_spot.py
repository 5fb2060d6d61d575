"""The local runner's spot reclaim: when it strikes, and that it leaves no process of the job alive."""

from __future__ import annotations

import subprocess
import sys

import psutil

from local_runner.spot import SpotInterruption, reclaim


def test_a_reclaim_strikes_after_the_step_or_as_a_checkpoint_write_begins():
    after = SpotInterruption(after_step=25)
    assert not after.due("step=20 epoch=0.7 loss=2.0 learning_rate=1e-4 samples_per_second=3.0")
    assert after.due("step=30 epoch=1.1 loss=2.0 learning_rate=1e-4 samples_per_second=3.0")
    assert not after.due("2026-11-30 08:21:50,686 INFO qa: writing checkpoint step-00000030")
    mid = SpotInterruption(after_step=25, mid_checkpoint=True)
    assert not mid.due("step=30 epoch=1.1 loss=2.0 learning_rate=1e-4 samples_per_second=3.0")
    assert not mid.due("2026-11-30 08:21:06,562 INFO qa: writing checkpoint step-00000020")
    assert mid.due("2026-11-30 08:21:50,686 INFO qa: writing checkpoint step-00000030")


def test_reclaim_kills_descendants_in_sessions_of_their_own_and_leaves_the_exit_status():
    """Like torchrun's workers: the grandchild runs in a new session, out of reach of the launcher's group."""
    launcher = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True); "
        "print('ready', flush=True); time.sleep(120)"
    )
    proc = subprocess.Popen([sys.executable, "-c", launcher], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    [worker] = psutil.Process(proc.pid).children()
    assert reclaim(proc.pid) == 2
    assert proc.wait(timeout=30) == -9
    assert not psutil.pid_exists(worker.pid) or worker.status() == psutil.STATUS_ZOMBIE
