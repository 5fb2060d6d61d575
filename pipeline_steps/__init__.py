"""Typed settings -> SageMaker Pipeline definition JSON. The only SageMaker-SDK code; knows nothing of CDK.

The container <-> definition contract lives in training_code/qa/outputs.py (stdlib only, so the containers and
the Lambda runtime load it as it is); pipeline_steps, stacks and local_runner import it as `qa.outputs`, so
training_code/ joins the import path here, behind everything else, for entry points that do not set it
(app.py, `python -m local_runner`).
"""

import sys
from pathlib import Path

_TRAINING_CODE = str(Path(__file__).resolve().parents[1] / "training_code")
if _TRAINING_CODE not in sys.path:
    sys.path.append(_TRAINING_CODE)
