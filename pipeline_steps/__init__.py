"""Typed settings -> SageMaker Pipeline definition JSON. The only SageMaker-SDK code; knows nothing of CDK.

The container <-> definition contract lives in training_code/qa/outputs.py (stdlib only, so the containers and
the Lambda runtime load it as it is); pipeline_steps, stacks and local_runner import it as `qa.outputs`, which
the project's editable install (`make venv`, pyproject.toml) makes importable from training_code/.
"""
