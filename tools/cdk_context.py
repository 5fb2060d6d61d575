"""Run a CDK command with the settings overrides of CONTEXT as `-c key=value` arguments (make deploy / diff).

CONTEXT (from the environment, never spliced into shell text) holds `key=value` words, split as a POSIX
shell splits words (quotes keep a value with spaces together) but never evaluated: no expansion, no globbing.
Every override is validated by the settings loader with cdk.json's environment before the CDK starts, so an
unknown key stops here with "did you mean" and no CDK process is run:

    make deploy ENV=dev CONTEXT="training.instance_count=2 hyperparameters.epochs=3"

TASK=<task> deploys (or diffs) one pipeline of an environment that deploys several (settings `pipelines`): its
stack by name instead of `--all`. The app still synthesizes every pipeline, so the data stack that the CDK deploys
with it keeps every pipeline's grants.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from config import ConfigError, load_settings, read_cdk_json_context
from config.paths import CDK_JSON
from tools.deployment import ToolParser, fail, run_tool

CONTEXT_VARIABLE = "CONTEXT"


def overrides(text: str) -> dict[str, str]:
    """The `key=value` words of `text`, in order; fails naming a word that is not one."""
    try:
        words = shlex.split(text)
    except ValueError as err:
        fail(f"{CONTEXT_VARIABLE}={text!r}: {err}; give key=value words separated by spaces")
    pairs: dict[str, str] = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals or not key:
            fail(f"{CONTEXT_VARIABLE}: {word!r} is not key=value (e.g. training.instance_count=2)")
        if key == "env":
            fail(f"{CONTEXT_VARIABLE}: {word!r} picks the environment: use ENV={value} instead")
        pairs[key] = value
    return pairs


def context_arguments(env_name: str, text: str, task_name: str | None = None) -> list[str]:
    """`-c key=value` for each override of `text`, after the settings of `env_name` with them validate, and with
    `task_name` the name of the stack of that pipeline of the environment (one it deploys: `pipelines`)."""
    pairs = overrides(text)
    try:
        settings = load_settings({**read_cdk_json_context(CDK_JSON), "env": env_name, **pairs})
        stacks = [] if task_name is None else [settings.pipeline_of(task_name).stack_name("pipeline")]
    except (ConfigError, ValueError) as err:
        fail(f"{CONTEXT_VARIABLE}: {err}" if isinstance(err, ConfigError) else str(err))
    return [argument for key, value in pairs.items() for argument in ("-c", f"{key}={value}")] + stacks


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(__doc__)
    parser.add_argument("--env", required=True, help="the environment the overrides apply to (ENV)")
    parser.add_argument(
        "--task",
        help="only the stack of the environment's pipeline of this task (TASK), and the stacks it depends on (the "
        "CDK includes the data and network stacks): `--all` is dropped from the command",
    )
    parser.add_argument("command", nargs="+", help="the CDK command line, after --")
    args = parser.parse_args(argv)
    arguments = context_arguments(args.env, os.environ.get(CONTEXT_VARIABLE, ""), args.task)
    command = [word for word in args.command if args.task is None or word != "--all"]
    return subprocess.run([*command, *arguments], check=False).returncode


if __name__ == "__main__":
    sys.exit(run_tool(main))
