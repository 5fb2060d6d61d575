"""Synth time: `python app.py` (the whole app) vs a one-bucket CDK app, alternating, same machine.

python -m bench.synth_time [--pairs 3]
"""

from __future__ import annotations

import argparse
import tempfile
import textwrap
from pathlib import Path

from bench.common import ROOT, alternate, median, run_python, save, table

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


def timed(args: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as out:
        _, elapsed = run_python(args, env={"CDK_OUTDIR": out})
    return {"seconds": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    baseline = Path(tempfile.mkdtemp()) / "one_bucket_app.py"
    baseline.write_text(ONE_BUCKET_APP)
    results = alternate(
        {"whole app (app.py)": lambda: timed([str(ROOT / "app.py")]), "one-bucket app": lambda: timed([str(baseline)])},
        args.pairs,
    )
    ours, base = median(results["whole app (app.py)"], "seconds"), median(results["one-bucket app"], "seconds")
    print(
        table(
            [["whole app (app.py)", f"{ours:.1f}", f"{ours / base:.2f}x"], ["one-bucket app", f"{base:.1f}", "1.00x"]],
            ["app", "seconds (median)", "ratio"],
        )
    )
    print(f"saved {save('synth_time', {'results': results, 'ratio': ours / base})}")


if __name__ == "__main__":
    main()
