"""A local run whose one step is a processing job that sleeps until it is stopped: what `make stop` and the
Stopped record are tested on, without training anything. `python -m tests.local_runner.stoppable_run <work dir>`
runs it in the foreground, as `python -m local_runner` would, recording as it goes."""

from __future__ import annotations

import sys
from pathlib import Path

from local_runner.record import save_local_record
from local_runner.registry import REGISTRY_FILE, LocalModelRegistry
from local_runner.runner import LocalPipelineRunner
from local_runner.store import STORE_DIR, LocalObjectStore
from reporting.local_runs import executions_dir

PIPELINE = "stoppable"
STEP = "Sleep"
JOB_PID_FILE = "job.pid"  # in the job's folder: the sleeping process, which the stop must end too
JOB_TMP_FILE = "job.tmp"  # in the job's folder: its temporary directory
SLEEP = (
    "import os, tempfile, time; open('job.pid', 'w').write(str(os.getpid())); "
    "open('job.tmp', 'w').write(tempfile.gettempdir()); print('sleeping', flush=True); time.sleep(600)"
)
DEFINITION = {
    "Version": "2020-12-01",
    "Parameters": [],
    "Steps": [
        {
            "Name": STEP,
            "Type": "Processing",
            "Arguments": {
                "ProcessingResources": {"ClusterConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1}},
                "AppSpecification": {"ContainerEntrypoint": [sys.executable, "-c", SLEEP]},
            },
        }
    ],
}


def main(work_dir: Path) -> int:
    store = LocalObjectStore(work_dir / STORE_DIR)
    runner = LocalPipelineRunner(
        DEFINITION,
        PIPELINE,
        store,
        LocalModelRegistry(work_dir / REGISTRY_FILE),
        executions_dir(work_dir),
        on_progress=lambda result: save_local_record(result, PIPELINE, store, work_dir),
    )
    result = runner.run()
    return 0 if result.status == "Succeeded" else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
