"""Synth time: `python app.py` (the whole app) vs a one-bucket CDK app, alternating, same machine.

python -m bench.synth_time [--pairs 3]

The whole app runs twice per round: cold (definition cache emptied first: the SageMaker SDK is imported and
the definition built, as on a first synth or after a change) and warm (the definition read back from the
cache, as on every later synth with the same inputs). CDK's built-in template validation is on in all.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import textwrap
from pathlib import Path

from bench.common import ROOT, alternate, median, run_python, save, table
from pipeline_steps.definition_cache import DEFAULT_CACHE_DIR

ONE_BUCKET_APP = textwrap.dedent(
    """
    import os
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    app = cdk.App()
    stack = cdk.Stack(app, "OneBucket")
    s3.Bucket(stack, "Bucket")
    app.synth()
    """
)


def timed(args: list[str], empty_cache: bool = False) -> dict[str, float]:
    if empty_cache:
        shutil.rmtree(DEFAULT_CACHE_DIR, ignore_errors=True)
    with tempfile.TemporaryDirectory() as out:
        _, elapsed = run_python(args, env={"CDK_OUTDIR": out})
    return {"seconds": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    baseline = Path(tempfile.mkdtemp()) / "one_bucket_app.py"
    baseline.write_text(ONE_BUCKET_APP)
    app = [str(ROOT / "app.py")]
    timed(app)  # fills the cache for the first warm run
    results = alternate(
        {
            "one-bucket app": lambda: timed([str(baseline)]),
            "whole app, cold": lambda: timed(app, empty_cache=True),
            "whole app, warm": lambda: timed(app),
        },
        args.pairs,
    )
    seconds = {name: median(values, "seconds") for name, values in results.items()}
    base = seconds["one-bucket app"]
    print(table([[name, f"{s:.1f}", f"{s / base:.2f}x"] for name, s in seconds.items()], ["app", "seconds", "ratio"]))
    ratios = {name: s / base for name, s in seconds.items()}
    print(f"saved {save('synth_time', {'results': results, 'median_seconds': seconds, 'ratios': ratios})}")


if __name__ == "__main__":
    main()
